"""Shared pieces of the GPT-2 tests (tests/test_gpt2*.py, test_distributed.py)."""

from __future__ import annotations

import functools

import pytest
import torch

from torchclad.nn import GPT2, GPT2Config
from torchclad.testing import ReferenceGPT2

# The tiny model of the gradient checks: vocab 11, block 8, 2 layers, 2 heads, n_embd 8.
TINY = dict(block_size=8, vocab_size=11, n_layer=2, n_head=2, n_embd=8)


def tiny_config(**kw) -> GPT2Config:
    return GPT2Config(**{**TINY, **kw})


@functools.lru_cache(maxsize=None)
def fused_unavailable() -> str | None:
    """Why the fused kernel cannot be loaded here, or None when it can."""
    from torchclad.nn.gpt2 import fused_kernel_module

    try:
        fused_kernel_module()
    except Exception as e:  # an engine or build error: reported as the skip reason
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return f"fused GPT-2 kernel unavailable ({type(e).__name__}: {first})"
    return None


def require_fused() -> None:
    why = fused_unavailable()
    if why is not None:
        pytest.fail(f"fused GPT-2 unavailable: {why}", pytrace=False)


MODES = [pytest.param(False, id="modular"), pytest.param(True, id="fused")]


def make(config: GPT2Config, fused: bool, dtype=torch.float32, seed: int = 0):
    """(torchclad GPT2, ReferenceGPT2 with the same weights), both in ``dtype``."""
    if fused:
        require_fused()
    torch.manual_seed(seed)
    ours = GPT2(config, fused=fused).to(dtype)
    ref = ReferenceGPT2(config).to(dtype)
    ref.load_state_dict(ours.state_dict())
    return ours, ref


def batch(config: GPT2Config, B: int, T: int, seed: int = 0, ignore: int = 0):
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, config.vocab_size, (B, T), generator=g)
    tgt = torch.randint(0, config.vocab_size, (B, T), generator=g)
    if ignore:
        tgt.view(-1)[torch.randperm(B * T, generator=g)[:ignore]] = -1
    return idx, tgt


def grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad for n, p in model.named_parameters()}
