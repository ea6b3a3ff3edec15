"""Property-based tests of every torchclad.nn module against torch.nn (issue "Reliability and security").

Hypothesis draws shapes (zero-size included), values, layouts (contiguous, transposed, strided)
and options; for every draw the module must not crash and must give torch's output and torch's
gradients (w.r.t. floating inputs and every parameter) within float32 tolerance, or a tight one
in float64. GELU has its own property test in tests/test_nn_gelu.py.
"""

from __future__ import annotations

import copy
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import torchclad.nn as tnn
from torchclad.testing import ReferenceGPT2, _RefBlock, _RefMLP, _RefSelfAttention

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

pytestmark = pytest.mark.filterwarnings("ignore:Initializing zero-element tensors is a no-op")

DTYPES = st.sampled_from([torch.float32, torch.float64])
TOL = {torch.float32: (1e-4, 1e-5), torch.float64: (1e-9, 1e-11)}


def lead_shapes(max_dims: int = 2, max_size: int = 3):
    return st.lists(st.integers(0, max_size), max_size=max_dims).map(tuple)


def tensor(data, shape, dtype, lim: float = 10.0) -> torch.Tensor:
    """A drawn tensor of ``shape``: drawn values, drawn memory layout (contiguous, a transposed
    view, or every other element of a wider buffer)."""
    np_dtype = np.float32 if dtype == torch.float32 else np.float64
    elements = st.floats(-lim, lim, allow_nan=False, allow_infinity=False,
                         width=32 if dtype == torch.float32 else 64)
    values = torch.from_numpy(data.draw(hnp.arrays(np_dtype, shape, elements=elements)).copy())
    layout = data.draw(st.sampled_from(["contiguous", "transposed", "strided"]))
    if layout == "transposed" and len(shape) >= 2:
        out = torch.empty(*shape[:-2], shape[-1], shape[-2], dtype=dtype).transpose(-1, -2)
    elif layout == "strided" and len(shape) >= 1:
        out = torch.empty(*shape[:-1], 2 * shape[-1], dtype=dtype)[..., ::2]
    else:
        out = torch.empty(shape, dtype=dtype)
    return out.copy_(values)


def spread(x: torch.Tensor, norm: tuple) -> torch.Tensor:
    """``x`` plus a ramp over each row of its trailing ``norm`` dims (in place, layout kept).

    Normalising a (nearly) constant row is ill-conditioned in float32: rstd = 1/sqrt(eps) scales
    one rounding of the row's mean up to ~2e-5 (torch's LayerNorm gets exactly 0 there, ours --
    a float32 sum, as in llm.c -- does not), and a Block's second LayerNorm amplifies that
    further. Used for float32 draws; float64 draws keep constant rows."""
    n = math.prod(norm)
    ramp = torch.linspace(-1.0, 1.0, n, dtype=x.dtype) if n > 1 else torch.zeros(n, dtype=x.dtype)
    with torch.no_grad():
        x.add_(ramp.reshape(norm))
    return x


def same_weights(ours: torch.nn.Module, ref: torch.nn.Module, seed: int) -> None:
    """Random values (not the init's zeros / ones) in both modules' parameters."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in ours.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype))
    missing, unexpected = ref.load_state_dict(ours.state_dict(), strict=False)
    assert not unexpected and all(k.endswith("attn.bias") for k in missing), (missing, unexpected)


def _close(got, want, dtype, what, truth=None):
    """``got`` within tolerance of torch's ``want``; in float32, where torch itself is off (an
    ill-conditioned draw), it may instead be at most twice as far from the float64 ``truth`` as
    torch's float32 result is."""
    rtol, atol = TOL[dtype]
    finite = want[torch.isfinite(want)] if want.numel() else want
    scale = max(1.0, finite.abs().max().item()) if finite.numel() else 1.0
    try:
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol * scale, equal_nan=True,
                                   msg=lambda m: f"{what}: {m}")
    except AssertionError:
        if truth is None or got.shape != truth.shape:
            raise
        t = truth.to(got.dtype).double()
        ours, torchs = (got.double() - t).abs(), (want.double() - t).abs()
        ok = (ours <= 2 * torchs + atol * scale + rtol * t.abs()) | (got.isnan() & want.isnan())
        if not bool(ok.all()):
            raise


def _outputs_and_grads(module, inputs, call, seed, names):
    """(output, {name: gradient of <output, g>}) for floating inputs and the named parameters."""
    xs = [x.detach().requires_grad_(x.is_floating_point()) for x in inputs]
    y = call(module, *xs)
    params = dict(module.named_parameters())
    wrt = {f"input {i}": x for i, x in enumerate(xs) if x.requires_grad}
    wrt.update((n, params[n]) for n in names)
    if not wrt:
        return y.detach(), {}
    g = torch.randn(y.shape, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
    grads = torch.autograd.grad(y, list(wrt.values()), g.to(y.dtype), allow_unused=True)
    return y.detach(), {n: torch.zeros_like(w) if d is None else d
                        for (n, w), d in zip(wrt.items(), grads)}


def matches_torch(ours, ref, inputs, dtype, seed=0, call=lambda m, *xs: m(*xs)):
    """Output, and gradients of <output, g> w.r.t. floating inputs and parameters, as torch's
    (our module gets the drawn layouts, torch contiguous copies)."""
    names = [n for n, _ in ours.named_parameters()]
    y, got = _outputs_and_grads(ours, inputs, call, seed, names)
    r, want = _outputs_and_grads(ref, [x.clone() for x in inputs], call, seed, names)
    truth_y, truth = None, {}
    if dtype == torch.float32:
        ref64 = copy.deepcopy(ref).double()
        truth_y, truth = _outputs_and_grads(
            ref64, [x.double() if x.is_floating_point() else x for x in inputs], call, seed, names)
    assert y.shape == r.shape and y.dtype == r.dtype, (y.shape, r.shape, y.dtype, r.dtype)
    _close(y, r, dtype, "output", truth_y)
    assert got.keys() == want.keys()
    for n in got:
        _close(got[n], want[n], dtype, f"grad of {n}", truth.get(n))


@SETTINGS
@given(data=st.data(), dtype=DTYPES, lead=lead_shapes(3), in_f=st.integers(0, 6),
       out_f=st.integers(0, 6), bias=st.booleans(), seed=st.integers(0, 2**16))
def test_linear(data, dtype, lead, in_f, out_f, bias, seed):
    ours = tnn.Linear(in_f, out_f, bias=bias, dtype=dtype)
    ref = torch.nn.Linear(in_f, out_f, bias=bias, dtype=dtype)
    same_weights(ours, ref, seed)
    matches_torch(ours, ref, [tensor(data, (*lead, in_f), dtype)], dtype, seed)


@SETTINGS
@given(data=st.data(), dtype=DTYPES, lead=lead_shapes(2),
       norm=st.lists(st.integers(1, 5), min_size=1, max_size=2).map(tuple),
       eps=st.sampled_from([1e-5, 1e-3, 0.5]), affine=st.booleans(), bias=st.booleans(),
       seed=st.integers(0, 2**16))
def test_layernorm(data, dtype, lead, norm, eps, affine, bias, seed):
    ours = tnn.LayerNorm(norm, eps=eps, elementwise_affine=affine, bias=bias, dtype=dtype)
    ref = torch.nn.LayerNorm(norm, eps=eps, elementwise_affine=affine, bias=bias, dtype=dtype)
    same_weights(ours, ref, seed)
    x = tensor(data, (*lead, *norm), dtype)
    matches_torch(ours, ref, [spread(x, norm) if dtype == torch.float32 else x], dtype, seed)


@SETTINGS
@given(data=st.data(), dtype=DTYPES, shape=lead_shapes(4, 4),
       lim=st.sampled_from([1.0, 30.0, 1e4]), seed=st.integers(0, 2**16))
def test_softmax(data, dtype, shape, lim, seed):
    nd = len(shape)
    dim = data.draw(st.integers(-nd, nd - 1)) if nd else data.draw(st.sampled_from([0, -1]))
    matches_torch(tnn.Softmax(dim), torch.nn.Softmax(dim), [tensor(data, shape, dtype, lim)],
                  dtype, seed)


@SETTINGS
@given(data=st.data(), dtype=DTYPES, num=st.integers(1, 8), dim=st.integers(0, 5),
       shape=lead_shapes(3), int32=st.booleans(), seed=st.integers(0, 2**16))
def test_embedding(data, dtype, num, dim, shape, int32, seed):
    ours, ref = tnn.Embedding(num, dim, dtype=dtype), torch.nn.Embedding(num, dim, dtype=dtype)
    same_weights(ours, ref, seed)
    ids = data.draw(hnp.arrays(np.int64, shape, elements=st.integers(0, num - 1)))
    idx = torch.from_numpy(ids.copy()).to(torch.int32 if int32 else torch.int64)
    matches_torch(ours, ref, [idx], dtype, seed)


@SETTINGS
@given(data=st.data(), dtype=DTYPES, n=st.integers(0, 5), c=st.integers(1, 6),
       extra=lead_shapes(1), reduction=st.sampled_from(["mean", "sum", "none"]),
       lim=st.sampled_from([1.0, 30.0, 1e4]), seed=st.integers(0, 2**16))
def test_cross_entropy(data, dtype, n, c, extra, reduction, lim, seed):
    # ignore_index: torch's default, or a valid class (those targets are then ignored)
    ignore_index = data.draw(st.sampled_from([-100, data.draw(st.integers(0, c - 1))]))
    one_d = data.draw(st.booleans()) and not extra
    shape, tshape = ((c,), ()) if one_d else ((n, c, *extra), (n, *extra))
    values = st.one_of(st.integers(0, c - 1), st.just(ignore_index))
    target = torch.from_numpy(data.draw(hnp.arrays(np.int64, tshape, elements=values)).copy())
    kw = dict(ignore_index=ignore_index, reduction=reduction)
    matches_torch(tnn.CrossEntropyLoss(**kw), torch.nn.CrossEntropyLoss(**kw),
                  [tensor(data, shape, dtype, lim), target], dtype, seed)


class _Lead(torch.nn.Module):
    """A (B, T, C) reference module applied to (*, T, C) inputs."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        *lead, T, C = x.shape
        return self.inner(x.reshape(math.prod(lead), T, C)).reshape(x.shape)

    def named_parameters(self, *a, **kw):  # same names as ours
        return self.inner.named_parameters(*a, **kw)


def _config(draw_heads, hs, block, bias):
    return SimpleNamespace(n_embd=draw_heads * hs, n_head=draw_heads, block_size=block,
                           bias=bias, dropout=0.0)


@SETTINGS
@given(data=st.data(), dtype=DTYPES, heads=st.integers(1, 3), hs=st.integers(1, 4),
       block=st.integers(1, 6), lead=lead_shapes(2), bias=st.booleans(),
       seed=st.integers(0, 2**16))
def test_causal_self_attention(data, dtype, heads, hs, block, lead, bias, seed):
    cfg = _config(heads, hs, block, bias)
    T = data.draw(st.integers(1, block))
    ours = tnn.CausalSelfAttention(cfg).to(dtype)
    ref = _Lead(_RefSelfAttention(cfg).to(dtype))
    same_weights(ours, ref.inner, seed)
    matches_torch(ours, ref, [tensor(data, (*lead, T, cfg.n_embd), dtype, 3.0)], dtype, seed)


@SETTINGS
@given(data=st.data(), dtype=DTYPES, n_embd=st.integers(1, 6), lead=lead_shapes(3),
       bias=st.booleans(), seed=st.integers(0, 2**16))
def test_mlp(data, dtype, n_embd, lead, bias, seed):
    cfg = SimpleNamespace(n_embd=n_embd, bias=bias)
    ours, ref = tnn.MLP(cfg).to(dtype), _RefMLP(cfg).to(dtype)
    same_weights(ours, ref, seed)
    matches_torch(ours, ref, [tensor(data, (*lead, n_embd), dtype, 3.0)], dtype, seed)


@settings(SETTINGS, max_examples=30)
@given(data=st.data(), dtype=DTYPES, heads=st.integers(1, 2), hs=st.integers(1, 3),
       block=st.integers(1, 5), lead=lead_shapes(1), bias=st.booleans(),
       seed=st.integers(0, 2**16))
def test_block(data, dtype, heads, hs, block, lead, bias, seed):
    cfg = _config(heads, hs, block, bias)
    T = data.draw(st.integers(1, block))
    ours = tnn.Block(cfg).to(dtype)
    ref = _Lead(_RefBlock(cfg).to(dtype))
    same_weights(ours, ref.inner, seed)
    x = spread(tensor(data, (*lead, T, cfg.n_embd), dtype, 3.0), (cfg.n_embd,))
    matches_torch(ours, ref, [x], dtype, seed)


@settings(SETTINGS, max_examples=30)
@given(data=st.data(), dtype=DTYPES, fused=st.booleans(), heads=st.integers(1, 2),
       hs=st.integers(1, 3), block=st.integers(1, 5), vocab=st.integers(1, 7),
       layers=st.integers(1, 2), bias=st.booleans(), B=st.integers(1, 2),
       seed=st.integers(0, 2**16))
def test_gpt2(data, dtype, fused, heads, hs, block, vocab, layers, bias, B, seed):
    cfg = tnn.GPT2Config(block_size=block, vocab_size=vocab, n_layer=layers, n_head=heads,
                         n_embd=heads * hs, bias=bias)
    T = data.draw(st.integers(1, block))
    ours = tnn.GPT2(cfg, fused=fused).to(dtype)
    ref = ReferenceGPT2(cfg).to(dtype)
    same_weights(ours, ref, seed)
    def ids(lo):
        return torch.from_numpy(data.draw(hnp.arrays(np.int64, (B, T),
                                                     elements=st.integers(lo, vocab - 1))).copy())

    idx, tgt = ids(0), ids(-1)  # -1: an ignored target
    matches_torch(ours, ref, [idx, tgt], dtype, seed, call=lambda m, i, t: m(i, t)[1])
