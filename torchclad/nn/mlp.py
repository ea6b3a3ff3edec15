"""nanoGPT's MLP: ``c_fc`` -> GELU (tanh, GPT-2's) -> ``c_proj``."""

from __future__ import annotations

import torch

from .activation import GELU
from .checks import check_positive_int, config_value
from .linear import Linear


class MLP(torch.nn.Module):
    """``MLP(config)``: ``c_fc = Linear(n_embd, 4 n_embd)``, ``gelu = GELU("tanh")``,
    ``c_proj = Linear(4 n_embd, n_embd)``, biases per ``config.bias``. ``config.dropout``, if
    present, must be 0.
    """

    def __init__(self, config) -> None:
        super().__init__()
        owner = "MLP"
        n_embd = check_positive_int(owner, "n_embd", config_value(owner, config, "n_embd"))
        bias = bool(config_value(owner, config, "bias", True, required=False))
        dropout = config_value(owner, config, "dropout", 0.0, required=False)
        if dropout:
            raise NotImplementedError(f"{owner}: dropout={dropout} is not supported (torchclad "
                                      "kernels are deterministic); use dropout=0.0")
        self.c_fc = Linear(n_embd, 4 * n_embd, bias=bias)
        self.gelu = GELU(approximate="tanh")
        self.c_proj = Linear(4 * n_embd, n_embd, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.gelu(self.c_fc(x)))
