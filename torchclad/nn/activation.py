"""Activations: GELU (``csrc/kernels/gelu.cpp``) and Softmax (``csrc/kernels/softmax.cpp``)."""

from __future__ import annotations

import math
import warnings
from typing import Optional

import torch

from ..builtin import ops as builtin_ops
from .checks import check_input, check_int32, usual


class GELU(torch.nn.Module):
    """GELU, like :class:`torch.nn.GELU` (same argument and default).

    - ``approximate="none"`` (torch's default): ``0.5 * x * (1 + erf(x / sqrt(2)))``, kernel
      ``gelu_erf_forward``;
    - ``approximate="tanh"`` (GPT-2's): ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))``,
      kernel ``gelu_forward``.

    Both gradients are the engine-generated reverse sweeps of those kernels.
    """

    __constants__ = ["approximate"]

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'tanh' or 'none', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if not usual(input):
            check_input("GELU", input)
        check_int32("GELU", "the number of input elements", input.numel())
        if self.approximate == "tanh":
            return builtin_ops.gelu_op(input)
        return builtin_ops.gelu_erf_op(input)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Softmax(torch.nn.Module):
    """Softmax along ``dim``, like :class:`torch.nn.Softmax`.

    Any ``dim``: the input is viewed with ``dim`` last (made contiguous) for the row kernel
    ``softmax_forward`` and the result moved back. ``dim=None`` picks the dimension the way torch
    does for that legacy form (with torch's warning).
    """

    __constants__ = ["dim"]

    def __init__(self, dim: Optional[int] = None) -> None:
        super().__init__()
        if dim is not None and (not isinstance(dim, int) or isinstance(dim, bool)):
            raise TypeError(f"Softmax: dim must be an int or None, got {dim!r}")
        self.dim = dim

    def __setstate__(self, state):  # like torch: old pickles may lack dim
        super().__setstate__(state)
        if not hasattr(self, "dim"):
            self.dim = None

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        check_input("Softmax", input)
        nd = input.dim()
        dim = self.dim
        if dim is None:
            warnings.warn("Implicit dimension choice for softmax has been deprecated. Change the "
                          "call to include dim=X as an argument.", stacklevel=2)
            dim = 0 if nd in (0, 1, 3) else 1
        lo, hi = (-1, 0) if nd == 0 else (-nd, nd - 1)
        if not lo <= dim <= hi:
            raise IndexError(f"Softmax: dim {dim} is out of range for a {nd}-dimensional input "
                             f"(expected to be in range of [{lo}, {hi}])")
        if nd == 0:
            return builtin_ops.softmax_op(input.reshape(1, 1)).reshape(())
        dim = dim % nd
        x = input.movedim(dim, -1)
        moved = x.shape
        C = moved[-1]
        N = math.prod(moved[:-1])
        check_int32("Softmax", "the number of input elements", N * C)
        y = builtin_ops.softmax_op(x.reshape(N, C)).reshape(moved)
        return y.movedim(-1, dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
