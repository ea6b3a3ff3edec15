"""A training step of GPT-2 124M (block 1024, vocab 50304, 12 layers,
12 heads, n_embd 768) in both modes, against the plain-PyTorch reference on the same weights."""

from __future__ import annotations

import math

import pytest
import torch

from gpt2_helpers import MODES, require_fused
from torchclad.nn import GPT2, GPT2Config
from torchclad.testing import ReferenceGPT2

# About a minute and ~4 GB peak on the 2-core CI machine: part of the default suite, so that
# "a 124M GPT-2 runs a training step in both modes" is shown on every run.


@pytest.mark.parametrize("fused", MODES)
def test_gpt2_124m_training_step(fused):
    if fused:
        require_fused()
    cfg = GPT2Config()
    torch.manual_seed(0)
    model = GPT2(cfg, fused=fused)
    assert 124e6 < model.get_num_params(non_embedding=False) < 125e6
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, cfg.vocab_size, (2, 64), generator=g)
    tgt = torch.randint(0, cfg.vocab_size, (2, 64), generator=g)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    _, loss = model(idx, tgt)
    assert abs(loss.item() - math.log(cfg.vocab_size)) < 0.5  # ~uniform at initialisation
    ref = ReferenceGPT2(cfg)
    ref.load_state_dict(model.state_dict())
    _, ref_loss = ref(idx, tgt)
    assert abs(loss.item() - ref_loss.item()) < 1e-4
    loss.backward()
    ref_loss.backward()
    for name in ("transformer.wte.weight", "transformer.h.11.mlp.c_proj.weight",
                 "transformer.h.0.attn.c_attn.bias"):
        a = dict(model.named_parameters())[name].grad
        b = dict(ref.named_parameters())[name].grad
        assert (a - b).abs().max() <= 1e-3 * b.abs().max(), name
    del ref, ref_loss
    opt.step()
    _, after = model(idx, tgt)
    assert after.item() < loss.item()
