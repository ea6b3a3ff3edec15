"""Activations."""

from __future__ import annotations

import torch

from . import _builtin


class GELU(torch.nn.Module):
    """GELU with the tanh approximation, like ``torch.nn.GELU(approximate="tanh")``.

    ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))``, computed by the built-in kernel
    ``csrc/kernels/gelu.cpp``; its gradient is the engine-generated reverse sweep.
    """

    def __init__(self, approximate: str = "tanh") -> None:
        super().__init__()
        if approximate == "none":
            raise NotImplementedError(
                "torchclad.nn.GELU(approximate='none') (the exact erf form) is not implemented "
                "yet; use approximate='tanh' (GPT-2's GELU) or torch.nn.GELU()"
            )
        if approximate != "tanh":
            raise ValueError(f"GELU: approximate must be 'tanh' or 'none', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return _builtin.gelu(input)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"
