"""Layer normalisation (built-in kernel ``csrc/kernels/layernorm.cpp``)."""

from __future__ import annotations

import math
from typing import Sequence, Union

import torch
from torch.nn import Parameter

from ..builtin import ops as builtin_ops
from .checks import INT32_MAX, check_input, check_int32, factory_kwargs, param, params_dtype, usual


class LayerNorm(torch.nn.Module):
    """Layer normalisation over the trailing ``normalized_shape``, like :class:`torch.nn.LayerNorm`.

    ``y = (x - mean) / sqrt(var + eps) * weight + bias`` with the biased variance; same
    arguments, initialisation (ones, zeros) and state_dict keys (``weight``, ``bias``) as torch.
    """

    __constants__ = ["normalized_shape", "eps", "elementwise_affine"]

    def __init__(self, normalized_shape: Union[int, Sequence[int]], eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        f = factory_kwargs("LayerNorm", device, dtype)
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        normalized_shape = tuple(normalized_shape)
        if not normalized_shape or any(not isinstance(d, int) or d < 0 for d in normalized_shape):
            raise ValueError("LayerNorm: normalized_shape must be an int or a non-empty sequence "
                             f"of non-negative ints, got {normalized_shape!r}")
        eps = float(eps)
        if not eps >= 0:
            raise ValueError(f"LayerNorm: eps must be >= 0, got {eps}")
        self.normalized_shape = normalized_shape
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(torch.empty(normalized_shape, **f))
            if bias:
                self.bias = Parameter(torch.empty(normalized_shape, **f))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()
        builtin_ops.layernorm_op(eps)  # register the op for this eps now, not while compiling

    def reset_parameters(self) -> None:
        if self.weight is not None:
            torch.nn.init.ones_(self.weight)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        w, b = param(self, "weight"), param(self, "bias")
        # The usual call, checked in a few attribute reads (the op checks again); anything else
        # takes the full checks below, which explain what is wrong.
        if (w is not None and b is not None and usual(input, w, b)
                and len(self.normalized_shape) == 1
                and input.dim() >= 1 and input.shape[-1] == self.normalized_shape[0]
                and input.numel() <= INT32_MAX):
            return builtin_ops.layernorm_kernel_op(self.eps)(input, w, b)[0]
        return self._forward_checked(input)

    def _forward_checked(self, input: torch.Tensor) -> torch.Tensor:
        dtype = params_dtype("LayerNorm", ("weight", self.weight), ("bias", self.bias))
        k = len(self.normalized_shape)
        check_input("LayerNorm", input, dtype=dtype, min_dim=k,
                    what=f" (normalized_shape={self.normalized_shape})")
        got = tuple(input.shape[input.dim() - k:])
        if got != self.normalized_shape:
            if k == 1:
                msg = (f"input's last dimension is {got[0]}, expected normalized_shape[-1] = "
                       f"{self.normalized_shape[0]}")
            else:
                msg = (f"input's trailing dimensions are {got}, expected normalized_shape = "
                       f"{self.normalized_shape}")
            raise ValueError(f"LayerNorm: {msg} (input shape {tuple(input.shape)})")
        check_int32("LayerNorm", "the number of input elements", input.numel())
        w, b = self.weight, self.bias
        if k == 1:
            # the op takes (..., C) as it is, and (C,) parameters: no reshape, so no view nodes
            # in the autograd graph
            w = builtin_ops.none_tensor(input) if w is None else w
            b = builtin_ops.none_tensor(input) if b is None else b
            out, _mean, _rstd = builtin_ops.layernorm_kernel_op(self.eps)(input, w, b)
            return out
        C = math.prod(self.normalized_shape)
        x = input.reshape(-1, C) if C > 0 else input.reshape(math.prod(input.shape[:-k]), C)
        w = builtin_ops.none_tensor(x) if w is None else w.reshape(C)
        b = builtin_ops.none_tensor(x) if b is None else b.reshape(C)
        out, _mean, _rstd = builtin_ops.layernorm_kernel_op(self.eps)(x, w, b)
        return out.reshape(input.shape)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")
