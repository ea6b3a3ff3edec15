"""GPT-2 (nanoGPT / llm.c ``train_gpt2.py`` naming), in two modes.

- ``GPT2(config)``: modular. Each layer is a :mod:`torchclad.nn` module, so autograd chains the
  engine-generated reverse sweeps of the layer kernels (and matmul's custom derivative); the
  tied embedding's gradient is accumulated in place (:mod:`.tied`).
- ``GPT2(config, fused=True)``: the whole forward is one C++ function, ``gpt2_forward`` in
  ``csrc/kernels/gpt2.cpp``, and the whole backward is one generated reverse sweep of it
  (:mod:`.fused`).

Both modes have the same modules, ``state_dict`` keys and outputs; a plain-PyTorch GPT-2 with the
same names (:class:`torchclad.testing.ReferenceGPT2`, nanoGPT's ``GPT``) loads either's
``state_dict`` and vice versa. ``lm_head.weight`` is ``transformer.wte.weight`` (tied).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import torch

from ...builtin import ops as builtin_ops
from ..attention import CausalSelfAttention
from ..checks import check_params_dtype, check_positive_int, dtype_name
from ..linear import Linear
from ..loss import CrossEntropyLoss
from ..mlp import MLP
from ..normalization import LayerNorm
from ..sparse import Embedding
from . import tied
from .fused import Fused

__all__ = ["GPT2Config", "Block", "GPT2", "TokenIndexError"]


@dataclass
class GPT2Config:
    """GPT-2 hyperparameters; the defaults are GPT-2 small (124M) with the vocabulary padded to
    50304 (a multiple of 64), as in nanoGPT / llm.c."""

    block_size: int = 1024
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    bias: bool = True


class TokenIndexError(IndexError, ValueError):
    """A token id (idx or target) outside the vocabulary. Both an ``IndexError`` (like
    ``torch.nn.Embedding``'s) and a ``ValueError`` (a bad argument value)."""


def _check_config(config: Any) -> None:
    for name in ("block_size", "vocab_size", "n_layer", "n_head", "n_embd"):
        check_positive_int("GPT2", f"config.{name}", getattr(config, name, None))
    if config.n_embd % config.n_head != 0:
        raise ValueError(f"GPT2: n_embd ({config.n_embd}) must be divisible by n_head "
                         f"({config.n_head}): each head gets n_embd // n_head channels")


class Block(torch.nn.Module):
    """One transformer block: ``x + attn(ln_1(x))``, then ``x + mlp(ln_2(x))`` (pre-norm)."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = builtin_ops.residual_op(x, self.attn(self.ln_1(x)))
        return builtin_ops.residual_op(x, self.mlp(self.ln_2(x)))


class GPT2(torch.nn.Module):
    """GPT-2 language model; ``forward(idx, targets=None) -> (logits, loss)`` as in nanoGPT.

    ``idx``: (B, T) int64 token ids, ``T <= block_size``, each in ``[0, vocab_size)``.
    With ``targets`` ((B, T), entries in ``[0, vocab_size)`` or -1 to ignore a position):
    ``logits`` (B, T, vocab_size) and ``loss``, the mean cross-entropy over the positions not
    ignored. Without: the logits of the last position only, (B, 1, vocab_size), and ``None``.

    ``fused=True`` runs the whole model as one C++ function with one generated backward (see the
    module docstring); parameters, state_dict and results are the same as ``fused=False``.
    Initialisation as GPT-2: weights N(0, 0.02), biases 0, LayerNorm 1/0, and the residual
    projections (``*.c_proj.weight``) N(0, 0.02 / sqrt(2 n_layer)).
    """

    def __init__(self, config: GPT2Config, fused: bool = False) -> None:
        super().__init__()
        _check_config(config)
        self.config = config
        self.fused = bool(fused)
        self.transformer = torch.nn.ModuleDict(dict(
            wte=Embedding(config.vocab_size, config.n_embd),
            wpe=Embedding(config.block_size, config.n_embd),
            h=torch.nn.ModuleList(Block(config) for _ in range(config.n_layer)),
            ln_f=LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied: one Parameter, two names
        self.loss_fn = CrossEntropyLoss(ignore_index=-1)
        self.apply(_init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))
        # llm.c / Hugging Face checkpoints carry the causal mask as a buffer "attn.bias"
        # (and "attn.masked_bias"); it is not state here: drop it when loading.
        self.register_load_state_dict_pre_hook(_drop_mask_buffers)
        self._fused: Optional[Fused] = Fused(config) if self.fused else None
        if self._fused is not None:
            self._fused.pack(self)

    # ---- nanoGPT conveniences

    def get_num_params(self, non_embedding: bool = True) -> int:
        """Number of parameters (the tied lm_head counted once); without wpe by default."""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n -= self.transformer.wpe.weight.numel()
        return n

    def extra_repr(self) -> str:
        return f"fused={self.fused}"

    # ---- forward

    def forward(self, idx: torch.Tensor, targets: Optional[torch.Tensor] = None):
        B, T = self._check_inputs(idx, targets)
        if self._fused is not None:
            # every parameter a view of the fused buffer, else re-packed, which checks them all
            return self._fused.forward(self, idx, targets)
        if torch.compiler.is_compiling():
            # the parameters' dtype and device, named here rather than by the first kernel
            check_params_dtype("GPT2", *self.named_parameters())
            return self._forward_modular(idx, targets, B, T)
        try:
            return self._forward_modular(idx, targets, B, T)
        except (TypeError, ValueError, RuntimeError) as err:
            # Every layer checks its own parameters (walking all of them before each step
            # costs ~50 us); when a layer refuses, the model's parameter at fault, if any, is
            # named here by its full name, caused by the layer's error.
            try:
                check_params_dtype("GPT2", *self.named_parameters())
            except (TypeError, ValueError) as named:
                raise named from err
            raise

    def _forward_modular(self, idx: torch.Tensor, targets: Optional[torch.Tensor], B: int,
                         T: int):
        tr = self.transformer
        x, head = tied.encode(self, idx.to(torch.int64).contiguous())
        for block in tr.h:
            x = block(x)
        x = tr.ln_f(x)
        if targets is None:
            return head(x[:, [-1], :]), None
        logits = head(x)
        loss = self.loss_fn(logits.reshape(B * T, self.config.vocab_size), targets.reshape(B * T))
        return logits, loss

    def _check_inputs(self, idx: Any, targets: Any) -> tuple[int, int]:
        cfg = self.config
        if not isinstance(idx, torch.Tensor):
            raise TypeError(f"GPT2: idx must be a (B, T) tensor of token ids, got "
                            f"{type(idx).__name__}")
        if idx.dtype not in (torch.int64, torch.int32) or idx.dim() != 2:
            raise TypeError("GPT2: idx must be a (B, T) int64 (or int32) tensor of token ids, "
                            f"got a tensor of dtype {dtype_name(idx.dtype)} and shape "
                            f"{tuple(idx.shape)}")
        if idx.device.type != "cpu":
            raise ValueError(f"GPT2: idx is on {idx.device}; torchclad kernels run on the CPU only")
        B, T = idx.shape
        if T > cfg.block_size:
            raise ValueError(f"GPT2: cannot forward a sequence of length {T}, block_size is only "
                             f"{cfg.block_size}")
        if T == 0 and targets is None:
            raise ValueError("GPT2: idx has T = 0 positions; without targets the model returns "
                             "the logits of the last position, and there is none")
        # Under torch.compile the modular model's Embedding and CrossEntropyLoss check the ids
        # inside the graph (torchclad::checked_indices); a data-dependent check here would
        # break the graph. The fused model has no such op: it keeps the check (and its graph
        # break).
        eager_check = not (torch.compiler.is_compiling() and not self.fused)
        if eager_check:
            _check_ids("idx", idx, cfg.vocab_size, allow_ignore=False)
        if targets is not None:
            if (not isinstance(targets, torch.Tensor)
                    or targets.dtype not in (torch.int64, torch.int32)):
                raise TypeError("GPT2: targets must be a (B, T) int64 (or int32) tensor of token "
                                f"ids (or -1 to ignore a position), got {_describe(targets)}")
            if tuple(targets.shape) != (B, T):
                raise ValueError(f"GPT2: targets has shape {tuple(targets.shape)}, expected the "
                                 f"shape of idx, {(B, T)}")
            if targets.device.type != "cpu":
                raise ValueError(f"GPT2: targets is on {targets.device}; torchclad kernels run on "
                                 "the CPU only")
            if eager_check:
                _check_ids("targets", targets, cfg.vocab_size, allow_ignore=True)
        return B, T

    # ---- sampling

    @torch.no_grad()
    def generate(self, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
                 top_k: Optional[int] = None, generator: Optional[torch.Generator] = None):
        """Append ``max_new_tokens`` sampled tokens to ``idx`` (B, T); the context is cropped to
        the last ``block_size`` tokens."""
        for _ in range(max_new_tokens):
            ctx = idx if idx.size(1) <= self.config.block_size else idx[:, -self.config.block_size:]
            logits, _ = self(ctx)
            logits = logits[:, -1, :] / max(temperature, 1e-8)
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("inf")
            nxt = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)
            idx = torch.cat((idx, nxt), dim=1)
        return idx


def _describe(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"a {dtype_name(x.dtype)} tensor of shape {tuple(x.shape)}"
    return type(x).__name__


def _check_ids(what: str, ids: torch.Tensor, vocab: int, allow_ignore: bool) -> None:
    bad = builtin_ops.first_out_of_range(ids, -1 if allow_ignore else 0, vocab)
    if bad is not None:
        allowed = f"[0, {vocab})" + (" or -1 (ignored)" if allow_ignore else "")
        raise TokenIndexError(f"GPT2: {what} contains {bad}, outside the vocabulary: token ids "
                              f"must be in {allowed} (vocab_size = {vocab})")


def _init_weights(module: torch.nn.Module) -> None:
    if isinstance(module, (Linear, torch.nn.Linear)):
        torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if module.bias is not None:
            torch.nn.init.zeros_(module.bias)
    elif isinstance(module, (Embedding, torch.nn.Embedding)):
        torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)


def _drop_mask_buffers(module, state_dict, prefix, local_metadata, strict, missing_keys,
                       unexpected_keys, error_msgs) -> None:
    for key in [k for k in state_dict if k.startswith(prefix + "transformer.h.")]:
        if key.endswith(".attn.bias") or key.endswith(".attn.masked_bias"):
            if state_dict[key].dim() == 4:  # (1, 1, block, block) mask, not a c_attn bias
                del state_dict[key]


