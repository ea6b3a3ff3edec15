"""Parity helpers: a torchclad module against its torch.nn twin."""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["assert_parity", "ReferenceGPT2"]


def _flatten(outputs: Any) -> tuple[list, Any]:
    """``(leaves, structure)`` of a module's outputs (tensors in tuples, lists, dicts...).

    torch's pytree (``torch.utils._pytree.tree_flatten``) is private, and torch has no public
    equivalent: it is used here only."""
    from torch.utils._pytree import tree_flatten

    return tree_flatten(outputs)


def _state_module(m: torch.nn.Module) -> torch.nn.Module:
    """The module that holds ``m``'s state: a ``torch.compile``'d module's original.

    torch has no public accessor for it: this reads ``OptimizedModule._orig_mod``, here only."""
    return getattr(m, "_orig_mod", m)


def _prepare(inputs: tuple) -> list:
    """Fresh leaves: floating tensors require grad, so input gradients can be compared too."""
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            x = x.detach().clone()
            if x.is_floating_point():
                x.requires_grad_(True)
        out.append(x)
    return out


def _close(a: torch.Tensor, b: torch.Tensor, what: str, rtol: float, atol: float) -> float:
    if a.shape != b.shape:
        raise AssertionError(f"assert_parity: {what}: shape {tuple(a.shape)} != {tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise AssertionError(f"assert_parity: {what}: dtype {a.dtype} != {b.dtype}")
    torch.testing.assert_close(
        a, b, rtol=rtol, atol=atol, equal_nan=True,
        msg=lambda m: f"assert_parity: {what} differs (module_a vs module_b, rtol={rtol}, atol={atol})\n{m}",
    )
    if a.numel() == 0 or not a.is_floating_point():
        return 0.0
    return (a.double() - b.double()).abs().nan_to_num(0.0).max().item()


def assert_parity(module_a: torch.nn.Module, module_b: torch.nn.Module, *inputs: Any,
                  rtol: float = 1e-4, atol: float = 1e-5) -> dict[str, float]:
    """Check that ``module_b`` computes what ``module_a`` does, values and gradients.

    Copies ``module_a``'s state_dict into ``module_b`` (either may be ``torch.compile``'d),
    runs both on copies of ``inputs``, compares every output, then backpropagates the same
    random weighting of the floating outputs through both and compares the gradients of every
    parameter (by name) and of every floating input. Raises ``AssertionError`` naming the first mismatch; returns the maximum
    absolute error per compared quantity.
    """
    # A torch.compile'd module runs compiled; its state and parameters are the original's.
    state_a, state_b = _state_module(module_a), _state_module(module_b)
    state_b.load_state_dict(state_a.state_dict())
    ins_a, ins_b = _prepare(inputs), _prepare(inputs)
    out_a, spec_a = _flatten(module_a(*ins_a))
    out_b, spec_b = _flatten(module_b(*ins_b))
    if spec_a != spec_b:
        raise AssertionError(f"assert_parity: outputs have different structure:\n{spec_a}\nvs\n{spec_b}")

    errors: dict[str, float] = {}
    loss_a = loss_b = None
    gen = torch.Generator().manual_seed(0)
    for i, (a, b) in enumerate(zip(out_a, out_b)):
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            if a != b:
                raise AssertionError(f"assert_parity: output[{i}]: {a!r} != {b!r}")
            continue
        errors[f"output[{i}]"] = _close(a.detach(), b.detach(), f"output[{i}]", rtol, atol)
        if a.is_floating_point() and a.requires_grad and b.requires_grad:
            w = torch.randn(a.shape, generator=gen, dtype=a.dtype)
            term_a, term_b = (a * w).sum(), (b * w.to(b.dtype)).sum()
            loss_a = term_a if loss_a is None else loss_a + term_a
            loss_b = term_b if loss_b is None else loss_b + term_b
    if (loss_a is None) != (loss_b is None):
        raise AssertionError("assert_parity: only one module's outputs require grad")
    if loss_a is None:
        return errors
    loss_a.backward()
    loss_b.backward()

    params_b = dict(state_b.named_parameters())
    for name, pa in state_a.named_parameters():
        pb = params_b.get(name)
        if pb is None:
            raise AssertionError(f"assert_parity: parameter {name!r} of module_a is missing in module_b")
        _compare_grads(f"grad of parameter {name!r}", pa.grad, pb.grad, rtol, atol, errors)
    for i, (xa, xb) in enumerate(zip(ins_a, ins_b)):
        if isinstance(xa, torch.Tensor) and xa.requires_grad:
            _compare_grads(f"grad of input {i}", xa.grad, xb.grad, rtol, atol, errors)
    return errors


def _compare_grads(what: str, ga, gb, rtol: float, atol: float, errors: dict) -> None:
    """Both gradients None, or both present and close (their error recorded under `what`)."""
    if (ga is None) != (gb is None):
        which = "module_a" if ga is None else "module_b"
        raise AssertionError(f"assert_parity: {what}: None in {which} only")
    if ga is not None:
        errors[what] = _close(ga, gb, what, rtol, atol)


# ----------------------------------------------------------------------------------------------
# A plain-PyTorch GPT-2 (the reference for torchclad.nn.GPT2): nanoGPT / llm.c ``train_gpt2.py``
# module and parameter names, so that state_dicts move between the two unchanged. Written here
# from the GPT-2 architecture; only the naming follows those projects.


class _RefSelfAttention(torch.nn.Module):
    def __init__(self, config: Any) -> None:
        super().__init__()
        if config.n_embd % config.n_head != 0:
            raise ValueError(f"n_embd = {config.n_embd} is not a multiple of n_head = {config.n_head}")
        self.n_head, self.n_embd = config.n_head, config.n_embd
        self.c_attn = torch.nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = torch.nn.Linear(config.n_embd, config.n_embd, bias=config.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        # (B, T, C) -> (B, n_head, T, head size)
        q, k, v = (z.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.n_head)
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        att = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class _RefMLP(torch.nn.Module):
    def __init__(self, config: Any) -> None:
        super().__init__()
        self.c_fc = torch.nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = torch.nn.GELU(approximate="tanh")
        self.c_proj = torch.nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.gelu(self.c_fc(x)))


class _RefBlock(torch.nn.Module):
    def __init__(self, config: Any) -> None:
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = _RefSelfAttention(config)
        self.ln_2 = torch.nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = _RefMLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class ReferenceGPT2(torch.nn.Module):
    """GPT-2 in plain PyTorch, the oracle torchclad.nn.GPT2 is tested and demonstrated against.

    Same constructor argument (any object with ``block_size, vocab_size, n_layer, n_head,
    n_embd, bias``, e.g. :class:`torchclad.nn.GPT2Config`), same ``state_dict`` keys
    (``transformer.wte/wpe/h.{i}.ln_1/attn.c_attn/attn.c_proj/ln_2/mlp.c_fc/mlp.c_proj/ln_f``,
    ``lm_head`` tied to ``wte``), same ``forward(idx, targets=None) -> (logits, loss)``: with
    targets, logits for every position and the mean cross-entropy over targets != -1; without,
    logits of the last position only (B, 1, vocab_size) and loss None. Initialisation as GPT-2:
    N(0, 0.02) weights, zero biases, residual projections scaled by 1/sqrt(2 n_layer).
    """

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = config
        self.transformer = torch.nn.ModuleDict(dict(
            wte=torch.nn.Embedding(config.vocab_size, config.n_embd),
            wpe=torch.nn.Embedding(config.block_size, config.n_embd),
            h=torch.nn.ModuleList(_RefBlock(config) for _ in range(config.n_layer)),
            ln_f=torch.nn.LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = torch.nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied
        self.apply(_gpt2_init)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(f"sequence length {T} > block_size {self.config.block_size}")
        pos = torch.arange(T, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is None:
            return self.lm_head(x[:, [-1], :]), None
        logits = self.lm_head(x)
        loss = torch.nn.functional.cross_entropy(
            logits.view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1)
        return logits, loss


def _gpt2_init(module: torch.nn.Module) -> None:
    if isinstance(module, torch.nn.Linear):
        torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if module.bias is not None:
            torch.nn.init.zeros_(module.bias)
    elif isinstance(module, torch.nn.Embedding):
        torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
