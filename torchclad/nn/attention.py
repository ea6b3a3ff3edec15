"""Causal multi-head self-attention, nanoGPT naming (``c_attn``, ``c_proj``).

Projections are :class:`~torchclad.nn.Linear` (the matmul op); the attention core -- scores,
causal mask, softmax, weighted sum -- is one engine-differentiated kernel,
``attention_forward`` in ``csrc/kernels/attention.cpp``.
"""

from __future__ import annotations

import math

import torch

from ..builtin import ops as builtin_ops
from .checks import (check_input, check_int32, check_params_dtype, check_positive_int,
                     config_value)
from .linear import Linear


class CausalSelfAttention(torch.nn.Module):
    """nanoGPT's ``CausalSelfAttention(config)``: ``config`` has ``n_embd``, ``n_head``,
    ``block_size`` and ``bias`` (``dropout``, if present, must be 0).

    Parameters ``c_attn`` (``Linear(n_embd, 3 n_embd)``) and ``c_proj``
    (``Linear(n_embd, n_embd)``). Input ``(*, T, n_embd)`` with ``T <= block_size`` and any
    number of leading batch dimensions (zero-size included).
    """

    def __init__(self, config) -> None:
        super().__init__()
        owner = "CausalSelfAttention"
        n_embd = check_positive_int(owner, "n_embd", config_value(owner, config, "n_embd"))
        n_head = check_positive_int(owner, "n_head", config_value(owner, config, "n_head"))
        block_size = check_positive_int(owner, "block_size",
                                        config_value(owner, config, "block_size"))
        bias = bool(config_value(owner, config, "bias", True, required=False))
        dropout = config_value(owner, config, "dropout", 0.0, required=False)
        if n_embd % n_head != 0:
            raise ValueError(f"{owner}: n_embd ({n_embd}) must be divisible by n_head ({n_head})")
        if dropout:
            raise NotImplementedError(f"{owner}: dropout={dropout} is not supported (torchclad "
                                      "kernels are deterministic); use dropout=0.0")
        self.n_embd = n_embd
        self.n_head = n_head
        self.block_size = block_size
        self.c_attn = Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = Linear(n_embd, n_embd, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        owner = "CausalSelfAttention"
        dtype = check_params_dtype(owner, ("c_attn.weight", self.c_attn.weight))
        check_input(owner, x, dtype=dtype, min_dim=2, what=" (..., T, n_embd)")
        C, T = x.shape[-1], x.shape[-2]
        if C != self.n_embd:
            raise ValueError(f"{owner}: input's last dimension is {C}, expected n_embd = "
                             f"{self.n_embd} (input shape {tuple(x.shape)})")
        if T > self.block_size:
            raise ValueError(f"{owner}: cannot forward a sequence of length {T}, block_size is "
                             f"only {self.block_size}")
        lead = x.shape[:-2]
        B = math.prod(lead)
        nh = self.n_head
        check_int32(owner, "the attention matrix size B * n_head * T * T", B * nh * T * T)
        check_int32(owner, "the number of q, k, v elements", B * T * 3 * C)
        qkv = self.c_attn(x.reshape(B, T, C))
        y, _preatt, _att = builtin_ops.attention_op(qkv.view(B, T, 3, nh, C // nh))
        return self.c_proj(y).reshape(x.shape)

    def extra_repr(self) -> str:
        return f"n_embd={self.n_embd}, n_head={self.n_head}, block_size={self.block_size}"
