"""Linear layer (built-in kernel ``csrc/kernels/matmul.cpp``, BLAS).

The forward is ``matmul_forward`` (sgemm/dgemm); its derivative is the one hand-written
derivative in torchclad, the Clad-style custom derivative ``csrc/custom/matmul.cpp`` (also
BLAS), which the engine wires in as the reverse sweep.
"""

from __future__ import annotations

import math

import torch
from torch.nn import Parameter

from ..builtin import ops as builtin_ops
from .checks import check_input, check_int32, factory_kwargs, param, params_dtype, usual


class Linear(torch.nn.Module):
    """``y = x @ weight.T + bias``, like :class:`torch.nn.Linear` (same arguments, init, state).

    ``weight`` is ``(out_features, in_features)``, ``bias`` ``(out_features)``. Input
    ``(*, in_features)`` with any number of leading dimensions (zero-size included), float32 or
    float64 matching the parameters, on the CPU.
    """

    __constants__ = ["in_features", "out_features"]

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        f = factory_kwargs("Linear", device, dtype)
        for what, v in (("in_features", in_features), ("out_features", out_features)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"Linear: {what} must be a non-negative int, got {v!r}")
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(torch.empty((out_features, in_features), **f))
        if bias:
            self.bias = Parameter(torch.empty(out_features, **f))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch.nn.Linear's initialisation: kaiming-uniform weight, uniform(+-1/sqrt(in)) bias."""
        torch.nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            torch.nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        w, b = param(self, "weight"), param(self, "bias")
        # The usual call is checked in a few reads; anything else takes the full checks, which
        # explain what is wrong.
        if not (usual(input, w, b) and input.dim() >= 1 and input.shape[-1] == self.in_features):
            self._check(input, w, b)
        lead = input.shape[:-1]
        rows = math.prod(lead)
        check_int32("Linear", "the number of input / output elements",
                    rows * max(self.in_features, self.out_features))
        bias = b if b is not None else builtin_ops.none_tensor(w)
        out = builtin_ops.matmul_op(input.reshape(rows, self.in_features), w, bias)
        return out.reshape(*lead, self.out_features)

    def _check(self, input: torch.Tensor, w, b) -> None:
        dtype = params_dtype("Linear", ("weight", w), ("bias", b))
        check_input("Linear", input, dtype=dtype, min_dim=1)
        if input.shape[-1] != self.in_features:
            raise ValueError(f"Linear: input's last dimension is {input.shape[-1]}, expected "
                             f"in_features = {self.in_features} (input shape {tuple(input.shape)})")

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")
