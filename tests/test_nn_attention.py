"""torchclad.nn.CausalSelfAttention: c_attn / c_proj Linear + one generated attention kernel."""

from __future__ import annotations

import re

import math
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from nn_helpers import ATOL, RTOL, gradcheck_module

import torchclad.nn as tnn
from torchclad.builtin import ops as builtin_ops
from torchclad.testing import assert_parity


@dataclass
class Config:
    n_embd: int = 12
    n_head: int = 3
    block_size: int = 8
    bias: bool = True
    dropout: float = 0.0


class RefAttention(torch.nn.Module):
    """nanoGPT's CausalSelfAttention in plain torch (the reference; explicit mask, any T)."""

    def __init__(self, config):
        super().__init__()
        self.c_attn = torch.nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = torch.nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.n_head, self.n_embd = config.n_head, config.n_embd

    def forward(self, x):
        *lead, T, C = x.shape
        B = math.prod(lead)
        x = x.reshape(B, T, C)
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.c_proj(y).reshape(*lead, T, C)


def _reference_attention(qkv):
    """(out, preatt, att) of the attention op in plain torch, qkv (B, T, 3, NH, hs)."""
    B, T, _, NH, hs = qkv.shape
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(hs)
    upper = torch.ones(T, T, dtype=torch.bool).triu(1)
    att = scores.masked_fill(upper, float("-inf")).softmax(-1)
    out = (att @ v).transpose(1, 2).reshape(B, T, NH * hs)
    return out, scores.masked_fill(upper, 0.0), att


def test_state_dict_keys_like_nanogpt():
    cfg = Config()
    ours, ref = tnn.CausalSelfAttention(cfg), RefAttention(cfg)
    assert list(ours.state_dict()) == list(ref.state_dict()) == [
        "c_attn.weight", "c_attn.bias", "c_proj.weight", "c_proj.bias"]
    assert isinstance(ours.c_attn, tnn.Linear) and isinstance(ours.c_proj, tnn.Linear)
    nb = tnn.CausalSelfAttention(Config(bias=False))
    assert list(nb.state_dict()) == ["c_attn.weight", "c_proj.weight"]
    d = tnn.CausalSelfAttention(dict(n_embd=8, n_head=2, block_size=4, bias=True))  # a dict works
    assert d.n_head == 2 and d.c_attn.out_features == 24


@pytest.mark.parametrize("bias", [True, False])
def test_gradcheck_float64(bias):
    cfg = Config(n_embd=4, n_head=2, block_size=3, bias=bias)
    assert gradcheck_module(tnn.CausalSelfAttention(cfg), torch.randn(2, 3, 4))


@pytest.mark.parametrize("cfg", [Config(), Config(n_embd=32, n_head=4, block_size=16),
                                 Config(n_embd=8, n_head=1, bias=False)], ids=str)
def test_float32_parity(cfg):
    x = torch.randn(3, cfg.block_size, cfg.n_embd)
    errors = assert_parity(RefAttention(cfg), tnn.CausalSelfAttention(cfg), x,
                           rtol=RTOL, atol=ATOL)
    assert "grad of parameter 'c_attn.weight'" in errors and "grad of input 0" in errors


@pytest.mark.parametrize("shape", [(5, 12), (2, 5, 12), (2, 1, 5, 12), (2, 2, 1, 3, 12),
                                   (0, 5, 12), (2, 0, 12), (3, 1, 12)], ids=str)
def test_leading_dims_and_zero_size(shape):
    cfg = Config()
    assert_parity(RefAttention(cfg), tnn.CausalSelfAttention(cfg), torch.randn(shape),
                  rtol=RTOL, atol=ATOL)


def test_large_scores_are_stable():
    cfg = Config(n_embd=4, n_head=1)
    ref, ours = RefAttention(cfg), tnn.CausalSelfAttention(cfg)
    with torch.no_grad():
        ref.c_attn.weight.mul_(300.0)
    errors = assert_parity(ref, ours, torch.randn(2, 6, 4), rtol=RTOL, atol=1e-3)
    assert all(math.isfinite(e) for e in errors.values())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("T", [5, 16, 37, 48])
def test_row_tail_block_with_very_negative_scores(dtype, T):
    """A row's last partial block of 16 scores runs as a full block: its lanes past the row's
    end read the mask's zeros, where exp(0 - max) overflows when every score is below about
    -88 (float32). Those lanes must add nothing, forwards and backwards: torch's outputs and
    gradients, all finite, for rows of every length mod 16."""
    torch.manual_seed(0)
    B, NH, hs = 2, 2, 16
    q = 4.0 + 0.1 * torch.randn(B, T, NH, hs, dtype=dtype)
    k = -8.0 + 0.1 * torch.randn(B, T, NH, hs, dtype=dtype)
    v = torch.randn(B, T, NH, hs, dtype=dtype)
    qkv = torch.stack([q, k, v], 2).requires_grad_()
    out, preatt, _ = builtin_ops.attention(qkv)
    assert preatt.tril().min() < -100           # exp(0 - max) overflows float32
    g = torch.randn_like(out)
    (out * g).sum().backward()
    ref = qkv.detach().clone().requires_grad_()
    qq, kk, vv = (ref[:, :, i].transpose(1, 2) for i in range(3))
    want = F.scaled_dot_product_attention(qq, kk, vv, is_causal=True).transpose(1, 2)
    (want.reshape(B, T, -1) * g).sum().backward()
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else {}
    torch.testing.assert_close(out, want.reshape(B, T, -1).detach(), **tol)
    assert torch.isfinite(qkv.grad).all()
    torch.testing.assert_close(qkv.grad, ref.grad, **tol)


def test_attention_op_outputs_scores_and_probabilities():
    B, T, NH, hs = 2, 5, 2, 3
    qkv = torch.randn(B, T, 3 * NH * hs, dtype=torch.float64)
    out, preatt, att = builtin_ops.attention(qkv.view(B, T, 3, NH, hs))
    q, k, v = (t.view(B, T, NH, hs).transpose(1, 2) for t in qkv.split(NH * hs, dim=2))
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, -1)
    torch.testing.assert_close(out, want)
    _, want_preatt, want_att = _reference_attention(qkv.view(B, T, 3, NH, hs))
    torch.testing.assert_close(preatt, want_preatt)
    torch.testing.assert_close(att, want_att)


def test_bad_config_and_inputs():
    with pytest.raises(ValueError, match="n_embd \\(10\\) must be divisible by n_head \\(3\\)"):
        tnn.CausalSelfAttention(Config(n_embd=10, n_head=3))
    with pytest.raises(ValueError, match="n_head must be a positive int, got 0"):
        tnn.CausalSelfAttention(Config(n_head=0))
    with pytest.raises(TypeError, match="config has no 'n_head'"):
        tnn.CausalSelfAttention(dict(n_embd=8, block_size=4))
    with pytest.raises(NotImplementedError, match="dropout=0.1"):
        tnn.CausalSelfAttention(Config(dropout=0.1))
    m = tnn.CausalSelfAttention(Config())
    with pytest.raises(ValueError, match="sequence of length 9, block_size is only 8"):
        m(torch.randn(1, 9, 12))
    with pytest.raises(ValueError, match="last dimension is 10, expected n_embd = 12"):
        m(torch.randn(1, 4, 10))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        m(torch.randn(12))
    with pytest.raises(TypeError, match="float32 tensor.*got float64"):
        m(torch.randn(1, 4, 12, dtype=torch.float64))
    with pytest.raises(ValueError, match="CPU only"):
        m(torch.randn(1, 4, 12, device="meta"))


def test_opcheck():
    for dtype in (torch.float32, torch.float64):
        qkv = torch.randn(2, 4, 3, 2, 3, dtype=dtype, requires_grad=True)
        torch.library.opcheck(builtin_ops.attention, (qkv,))


def test_attention_tape_holds_only_row_statistics():
    """preatt / att are TORCHCLAD_WRITE_ONCE: the generated forward tapes no array element."""
    from torchclad import engine as ad
    from torchclad.builtin import registry as kernels

    spec = next(s for s in kernels.KERNELS if s.name == "attention_forward")
    d = ad.differentiate(kernels.unit_source(spec), spec.name, list(spec.wrt))
    forw = dict(d.functions)["attention_forward_reverse_forw"]
    pushes = [line.strip() for line in forw.splitlines() if "_tape.push" in line]
    slots = [line.strip() for line in forw.splitlines()
             if re.fullmatch(r"_t\d+\[.*\] = (m0|sum);", line.strip())]
    # per row its max and its sum of exps, nothing per (t, s) pair: the probability the
    # weighted sum reads into a local is re-read from att (WRITE_ONCE) in the sweep. The rows
    # run in parallel, so the two values go to per-row slots, pushed whole after the loop.
    assert len(slots) == 2 and [s.split(" = ")[1] for s in slots] == ["m0;", "sum;"]
    assert len(pushes) == 2 and all(p.startswith("_tape.push_array(") for p in pushes)
    assert "#pragma omp parallel for collapse(3)" in forw



@pytest.mark.parametrize("T", [64, 65, 130, 150])
def test_long_sequences_compute_the_causal_scores_by_blocks(T):
    """Past 64 positions the scores are computed by blocks of 64 query rows, each only up to its
    last key (matmul_strided's tri = 2): outputs and the gradients of all three (scores above the
    diagonal are the mask's zeros, so a seed there gives nothing) as torch's, for a last block
    full or partial."""
    torch.manual_seed(0)
    qkv = torch.randn(2, T, 3, 2, 5, dtype=torch.float64, requires_grad=True)
    got = builtin_ops.attention(qkv)
    seeds = [torch.randn_like(t) for t in got]
    torch.autograd.backward(got, seeds)
    ref = qkv.detach().clone().requires_grad_()
    want = _reference_attention(ref)
    torch.autograd.backward(want, seeds)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w.detach())
    torch.testing.assert_close(qkv.grad, ref.grad)


def test_long_sequence_gradcheck_forward_ad_and_double_backward():
    """The causal scores' custom derivatives (pullback, pushforward and the pullback's tangent)
    against finite differences, over two blocks of query rows."""
    torch.manual_seed(0)
    qkv = torch.randn(1, 70, 3, 1, 2, dtype=torch.float64, requires_grad=True)
    fn = builtin_ops.attention
    assert torch.autograd.gradcheck(fn, (qkv,), check_forward_ad=True)
    assert torch.autograd.gradgradcheck(fn, (qkv,))


@pytest.mark.parametrize("hs", [7, 16, 37, 100])
def test_head_sizes_through_every_column_chunk(hs):
    """att @ v's diagonal blocks sum their columns in register chunks of 64, 32 and 16 and then
    one at a time (matmul_tri_sum, forward and d v): head sizes 7 (single columns), 16, 37
    (32 + 5) and 100 (64 + 32 + 4), over T = 40 (a full block of 32 rows and a part),
    against the plain-torch reference and finite differences."""
    torch.manual_seed(hs)
    qkv = torch.randn(2, 40, 3, 2, hs, dtype=torch.float64, requires_grad=True)
    ref = qkv.detach().clone().requires_grad_()
    got = builtin_ops.attention(qkv)
    want = _reference_attention(ref)
    seed = torch.randn_like(want[0])
    got[0].backward(seed)
    want[0].backward(seed)
    torch.testing.assert_close(got[0], want[0].detach())
    torch.testing.assert_close(qkv.grad, ref.grad)
    small = qkv.detach()[:1, :20].clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda x: builtin_ops.attention(x)[0], (small,))
