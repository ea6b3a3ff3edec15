"""Edge values against torch (issue "Reliability and security").

NaN and ±Inf in inputs, weights and incoming gradients propagate to the same positions as in
torch; logits of ±1e4 stay finite in softmax and cross-entropy; empty tensors, non-contiguous,
transposed, expanded and offset inputs give what contiguous ones give (bit for bit) and what torch
gives; ``.grad`` buffers that already hold values (NaN included) are accumulated into, as torch
does. Two places where torch's own result is an artifact and ours differs on purpose are pinned
down here: causal attention does not leak a NaN into other positions through the masked-out
zeros (a future input's NaN into earlier outputs, an earlier output gradient's NaN into later
inputs), and GELU(+inf) is +inf in float32 as in float64 (torch's float32 erf path gives NaN).
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch

import torchclad
import torchclad.nn as tnn
from torchclad.testing import ReferenceGPT2, _RefBlock, _RefMLP, _RefSelfAttention

NAN, INF = float("nan"), float("inf")
DTYPES = [pytest.param(torch.float32, id="float32"), pytest.param(torch.float64, id="float64")]
CFG = SimpleNamespace(n_embd=8, n_head=2, block_size=6, bias=True, dropout=0.0)
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.float64: dict(rtol=1e-10, atol=1e-12)}


def pair(name: str, dtype: torch.dtype):
    """(torchclad module, torch module with the same weights, input shape)."""
    torch.manual_seed(0)
    ours, ref, shape = {
        "Linear": (tnn.Linear(8, 5), torch.nn.Linear(8, 5), (2, 3, 8)),
        "LayerNorm": (tnn.LayerNorm(8), torch.nn.LayerNorm(8), (2, 3, 8)),
        "GELU-tanh": (tnn.GELU("tanh"), torch.nn.GELU("tanh"), (2, 3, 8)),
        "GELU": (tnn.GELU(), torch.nn.GELU(), (2, 3, 8)),
        "Softmax": (tnn.Softmax(-1), torch.nn.Softmax(-1), (2, 3, 8)),
        "Softmax-dim0": (tnn.Softmax(0), torch.nn.Softmax(0), (2, 3, 8)),
        "MLP": (tnn.MLP(CFG), _RefMLP(CFG), (2, 3, 8)),
        "CausalSelfAttention": (tnn.CausalSelfAttention(CFG), _RefSelfAttention(CFG), (2, 5, 8)),
        "Block": (tnn.Block(CFG), _RefBlock(CFG), (2, 5, 8)),
    }[name]
    ours, ref = ours.to(dtype), ref.to(dtype)
    with torch.no_grad():  # not the init's ones / zeros
        for p in ours.parameters():
            p.copy_(torch.randn_like(p))
    ref.load_state_dict(ours.state_dict())
    return ours, ref, shape


ELEMENTWISE = ["Linear", "LayerNorm", "GELU-tanh", "GELU", "Softmax", "Softmax-dim0", "MLP"]
ALL = ELEMENTWISE + ["CausalSelfAttention", "Block"]


def fwd_bwd(module, x, g, *, grads=None):
    """Output, input gradient and parameter gradients of <module(x), g>; ``grads`` pre-fills
    every .grad first (a value or a tensor-like fill)."""
    x = x.detach().requires_grad_()
    if grads is not None:
        x.grad = grads(x)
        for p in module.parameters():
            p.grad = grads(p)
    else:
        module.zero_grad(set_to_none=True)
    y = module(x)
    y.backward(g)
    return [y.detach(), x.grad, *[p.grad for p in module.parameters()]]


def assert_like(got, want, dtype, what=""):
    """Same shapes, NaN where torch has NaN, the same infinities, finite values close."""
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want)):
        finite = b[torch.isfinite(b)]
        scale = max(1.0, finite.abs().max().item()) if finite.numel() else 1.0
        tol = TOL[dtype]
        torch.testing.assert_close(a, b, equal_nan=True, rtol=tol["rtol"], atol=tol["atol"] * scale,
                                   msg=lambda m: f"{what} [{k}]: {m}")


def assert_identical(got, want, what=""):
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want)):
        assert a.shape == b.shape and a.dtype == b.dtype, f"{what} [{k}]"
        assert torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0)) and torch.equal(a.isnan(), b.isnan()), \
            f"{what} [{k}]: differs"


# ---- NaN and ±Inf

SPECIALS = {"nan": [NAN], "+inf": [INF], "-inf": [-INF], "+inf,-inf": [INF, -INF], "nan,+inf": [NAN, INF]}


@pytest.mark.parametrize("special", list(SPECIALS))
@pytest.mark.parametrize("name", ELEMENTWISE)
@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_and_inf_inputs_propagate_like_torch(name, dtype, special):
    ours, ref, shape = pair(name, dtype)
    x = torch.randn(shape, dtype=dtype)
    for k, v in enumerate(SPECIALS[special]):
        x[1, 2, k] = v
    g = torch.randn(ours(x).shape, dtype=dtype)
    if name == "GELU" and dtype == torch.float32:
        # torch's float32 erf GELU gives NaN at +inf (its float64 gives +inf, the limit): compare
        # with torch in float64
        want = [t.float() for t in fwd_bwd(ref.double(), x.double(), g.double())]
    else:
        want = fwd_bwd(ref, x, g)
    got = fwd_bwd(ours, x, g)
    assert_like(got, want, dtype, f"{name} with {special}")
    if "nan" in special:
        assert got[0].isnan().any(), "the NaN vanished"


def test_gelu_at_infinity():
    for dtype in (torch.float32, torch.float64):
        x = torch.tensor([INF, -INF, NAN], dtype=dtype)
        for approximate in ("none", "tanh"):
            y = tnn.GELU(approximate)(x)
            assert y[0] == INF and y[1:].isnan().all(), (approximate, dtype, y)  # -inf * 0 = nan
            assert torch.equal(torch.nn.functional.gelu(x.double(), approximate=approximate)[0:1],
                               y.double()[0:1])


@pytest.mark.parametrize("special", list(SPECIALS))
@pytest.mark.parametrize("name", ["CausalSelfAttention", "Block"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_nan_and_inf_stay_in_the_future(name, dtype, special):
    """A NaN / Inf at position t = 2: torch's masked matmul multiplies the masked-out zeros by it
    and NaNs every position; the causal kernel never reads the future, so positions 0 and 1 are
    exactly the result without it, and every position from 2 on is NaN as in torch."""
    ours, ref, shape = pair(name, dtype)
    clean = torch.randn(shape, dtype=dtype)
    x = clean.clone()
    for k, v in enumerate(SPECIALS[special]):
        x[0, 2, k] = v
    g = torch.randn(shape, dtype=dtype)
    got, want = fwd_bwd(ours, x, g), fwd_bwd(ref, x, g)
    base = fwd_bwd(ours, clean, g)
    assert torch.equal(got[0][0, :2], base[0][0, :2])       # the past: untouched, bit for bit
    assert got[0][0, 2:].isnan().all() and want[0][0, 2:].isnan().all()
    assert torch.equal(got[0][1], base[0][1])               # the other sequence of the batch
    torch.testing.assert_close(got[0][1], want[0][1], **TOL[dtype])
    for a, b in zip(got[1:], want[1:]):  # gradients: NaN where torch's are
        assert torch.equal(a.isnan(), b.isnan())


@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_nan_gradient_stays_in_the_past(dtype):
    """A NaN in the incoming gradient at t = 2 reaches the inputs at t <= 2 only (they produced
    that output); torch's dv = att^T @ dy multiplies it by the masked zeros of later positions."""
    ours, ref, shape = pair("CausalSelfAttention", dtype)
    x = torch.randn(shape, dtype=dtype)
    g = torch.randn(shape, dtype=dtype)
    g[0, 2, 1] = NAN
    got, want = fwd_bwd(ours, x, g), fwd_bwd(ref, x, g)
    assert got[1][0, :3].isnan().all() and want[1][0, :3].isnan().all()
    assert torch.isfinite(got[1][0, 3:]).all() and want[1][0, 3:].isnan().all()
    assert torch.isfinite(got[1][1]).all()
    torch.testing.assert_close(got[1][1], want[1][1], **TOL[dtype])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_cross_entropy_special_logits_like_torch(dtype, reduction):
    cases = {
        "nan in the target's row": ([(1, 2, NAN)], [0, 2, 1]),
        "nan in another row": ([(1, 0, NAN)], [0, 2, 1]),
        "nan in an ignored row": ([(1, 0, NAN)], [0, -100, 1]),  # loss finite, its grad NaN
        "+inf at the target": ([(0, 0, INF)], [0, 2, 1]),
        "+inf elsewhere": ([(0, 1, INF)], [0, 2, 1]),
        "-inf elsewhere": ([(0, 1, -INF)], [0, 2, 1]),
        "-inf at the target": ([(0, 0, -INF)], [0, 2, 1]),
        "a row of -inf": ([(0, 0, -INF), (0, 1, -INF), (0, 2, -INF)], [0, 2, 1]),
        "±1e4": ([(0, 0, 1e4), (0, 1, -1e4), (1, 2, 1e4), (2, 0, -1e4), (2, 1, 1e4)], [1, 2, 0]),
    }
    for what, (cells, target) in cases.items():
        x = torch.randn(3, 3, dtype=dtype)
        for r, c, v in cells:
            x[r, c] = v
        t = torch.tensor(target)
        res = []
        for m in (tnn.CrossEntropyLoss(reduction=reduction), torch.nn.CrossEntropyLoss(reduction=reduction)):
            xx = x.clone().requires_grad_()
            y = m(xx, t)
            y.backward(torch.ones_like(y))
            res.append([y.detach(), xx.grad])
        assert_like(res[0], res[1], dtype, what)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_large_and_infinite_logits_like_torch(dtype):
    x = torch.tensor([[1e4, -1e4, 0.0, 1e4], [-1e4, -1e4, -1e4, -1e4], [INF, 1.0, 2.0, 3.0],
                      [-INF, 1.0, -INF, 3.0], [-INF, -INF, -INF, -INF]], dtype=dtype)
    g = torch.randn(x.shape, dtype=dtype)
    for dim in (-1, 0):
        want = fwd_bwd(torch.nn.Softmax(dim), x, g)
        got = fwd_bwd(tnn.Softmax(dim), x, g)
        assert_like(got, want, dtype, f"dim={dim}")
    assert torch.isfinite(tnn.Softmax(-1)(x[:2])).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_nan_inf_weights_and_gradients_like_torch(dtype):
    ours = tnn.Embedding(5, 3).to(dtype)
    ref = torch.nn.Embedding(5, 3).to(dtype)
    with torch.no_grad():
        ours.weight[1, 1], ours.weight[2, 0], ours.weight[3, 2] = NAN, INF, -INF
    ref.load_state_dict(ours.state_dict())
    idx = torch.tensor([[1, 2, 1, 0], [3, 3, 4, 2]])
    g = torch.randn(2, 4, 3, dtype=dtype)
    g[0, 0, 2], g[1, 2, 0], g[1, 0, 1] = NAN, INF, -INF
    res = []
    for m in (ours, ref):
        y = m(idx)
        y.backward(g)
        res.append([y.detach(), m.weight.grad])
    assert_like(res[0], res[1], dtype)


# ---- .grad that already holds values, NaN in the incoming gradient

FILLS = {
    "nan": lambda t: torch.full_like(t, NAN),
    "1.5": lambda t: torch.full_like(t, 1.5),
    "mixed": lambda t: torch.where(torch.arange(t.numel()).reshape(t.shape) % 3 == 0,
                                   torch.full_like(t, NAN), torch.full_like(t, -2.0)),
}


@pytest.mark.parametrize("fill", list(FILLS))
@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("dtype", DTYPES)
def test_prefilled_grad_accumulates_like_torch(name, dtype, fill):
    """.grad of inputs and parameters already set (NaN stays NaN, values are added to), and a NaN
    in the incoming gradient: every .grad as torch leaves it. (A NaN in the gradient of an earlier
    position of attention: torch spreads it to every position's dv through att = 0 entries, the
    causal sweep does not; test_attention_nan_and_inf_stay_in_the_future.)"""
    ours, ref, shape = pair(name, dtype)
    x = torch.randn(shape, dtype=dtype)
    g = torch.randn(shape[:-1] + ours(x).shape[-1:], dtype=dtype)
    g[0, -1, 0] = NAN  # the last position: attention's NaN stays causal (see above)
    got = fwd_bwd(ours, x, g, grads=FILLS[fill])
    want = fwd_bwd(ref, x, g, grads=FILLS[fill])
    assert_like(got, want, dtype, f"{name}, .grad pre-filled with {fill}")


@pytest.mark.parametrize("fused", [False, True], ids=["modular", "fused"])
def test_prefilled_grad_gpt2_and_function_op(fused):
    cfg = tnn.GPT2Config(block_size=6, vocab_size=11, n_layer=1, n_head=2, n_embd=8)
    torch.manual_seed(0)
    ours, ref = tnn.GPT2(cfg, fused=fused), ReferenceGPT2(cfg)
    ref.load_state_dict(ours.state_dict())
    idx, tgt = torch.randint(0, 11, (2, 6)), torch.randint(0, 11, (2, 6))
    res = []
    for m in (ours, ref):
        for k, p in enumerate(m.parameters()):
            p.grad = FILLS["mixed"](p) if k % 2 else FILLS["1.5"](p)
        m(idx, tgt)[1].backward()
        res.append({n: p.grad for n, p in m.named_parameters()})
    assert res[0].keys() == res[1].keys()
    for n in res[0]:
        torch.testing.assert_close(res[0][n], res[1][n], equal_nan=True, rtol=1e-4, atol=1e-5,
                                   msg=lambda m: f"{n}: {m}")

    op = torchclad.function(
        "template <typename T> void sq(T* out, const T* x, int N) "
        "{ for (int i = 0; i < N; i++) out[i] = x[i] * x[i]; }",
        "sq", inputs=["x"], outputs={"out": _same_shape}, sizes={"N": _numel})
    x = torch.tensor([1.0, 2.0, NAN, 3.0], dtype=torch.float64, requires_grad=True)
    x.grad = torch.tensor([NAN, 0.5, 0.0, 1.0], dtype=torch.float64)
    op(x).backward(torch.tensor([1.0, NAN, 1.0, 1.0], dtype=torch.float64))
    want = torch.tensor([NAN, NAN, NAN, 7.0], dtype=torch.float64)
    torch.testing.assert_close(x.grad, want, equal_nan=True)


def _same_shape(x):
    return x.shape


def _numel(x):
    return x.numel()


# ---- empty tensors

@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_batches_like_torch(name, dtype):
    """Zero-size leading dims: empty outputs and input gradients, zero parameter gradients."""
    ours, ref, shape = pair(name, dtype)
    sequence = name in ("CausalSelfAttention", "Block")  # (B, T, C) references
    for lead in ((0, 5), (2, 0)) if sequence else ((0,), (0, 3), (2, 0)):
        x = torch.randn(*lead, shape[-1], dtype=dtype)
        g = torch.randn(ours(x).shape, dtype=dtype)
        got, want = fwd_bwd(ours, x, g), fwd_bwd(ref, x, g)
        assert_like(got, want, dtype, f"{name} {lead}")
        assert got[0].numel() == 0
        assert all(p.grad is not None and not p.grad.any() for p in ours.parameters())


def test_empty_classes_indices_and_targets_like_torch():
    for reduction in ("mean", "sum", "none"):
        x = torch.randn(0, 5, requires_grad=True)
        t = torch.zeros(0, dtype=torch.int64)
        y = tnn.CrossEntropyLoss(reduction=reduction)(x, t)
        r = torch.nn.CrossEntropyLoss(reduction=reduction)(x, t)
        torch.testing.assert_close(y, r, equal_nan=True)  # mean over nothing: nan, as torch
        y.backward(torch.ones_like(y))
        assert x.grad.shape == (0, 5)
    emb, ref = tnn.Embedding(4, 3), torch.nn.Embedding(4, 3)
    ref.load_state_dict(emb.state_dict())
    for idx in (torch.zeros(0, dtype=torch.int64), torch.zeros(2, 0, dtype=torch.int64)):
        y = emb(idx)
        assert y.shape == ref(idx).shape
        y.sum().backward()
        assert emb.weight.grad is not None and not emb.weight.grad.any()
    zero_width = tnn.Embedding(4, 0)(torch.tensor([1, 2]))
    assert zero_width.shape == (2, 0)


# ---- layouts: non-contiguous, transposed, expanded, offset

def _layouts(shape, dtype):
    """(name, tensor) views of one set of values with different memory layouts."""
    base = torch.randn(shape, dtype=dtype)
    out = {"contiguous": base}
    if len(shape) >= 2:
        t = torch.empty(*shape[:-2], shape[-1], shape[-2], dtype=dtype).transpose(-1, -2)
        out["transposed"] = t.copy_(base)
        out["lead-transposed"] = base.transpose(0, 1).contiguous().transpose(0, 1)
    out["strided"] = torch.empty(*shape[:-1], 2 * shape[-1], dtype=dtype)[..., ::2].copy_(base)
    out["offset"] = torch.randn(1 + base.numel(), dtype=dtype)[1:].view(shape).copy_(base)
    out["expanded"] = base[:1].expand(shape)  # stride 0 along dim 0
    return out


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("dtype", DTYPES)
def test_layouts_match_contiguous_and_torch(name, dtype):
    ours, ref, shape = pair(name, dtype)
    layouts = _layouts(shape, dtype)
    g = torch.randn(ours(layouts["contiguous"]).shape, dtype=dtype)
    for what, x in layouts.items():
        if what != "contiguous":
            assert not x.is_contiguous() or x.storage_offset() > 0, what
        got = fwd_bwd(ours, x, g)
        assert_identical(got, fwd_bwd(ours, x.contiguous(), g), f"{name} {what} vs contiguous")
        assert_like(got, fwd_bwd(ref, x.contiguous(), g), dtype, f"{name} {what} vs torch")


def test_layouts_cross_entropy_and_embedding():
    logits = torch.randn(5, 7, dtype=torch.float64)
    t = torch.tensor([0, 6, 2, 2, 1])
    layouts = {"transposed": logits.t().contiguous().t(),
               "strided": torch.randn(5, 14, dtype=torch.float64)[:, ::2].copy_(logits),
               "offset-slice": torch.randn(5, 2, 7, dtype=torch.float64)[:, 1].copy_(logits)}
    for what, x in layouts.items():
        a, b = x.detach().requires_grad_(), logits.clone().requires_grad_()
        ya, yb = tnn.CrossEntropyLoss()(a, t), torch.nn.CrossEntropyLoss()(b, t)
        ya.backward(), yb.backward()
        torch.testing.assert_close(ya, yb, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-12, atol=1e-12, msg=what)
    # classes in dim 1 of a (N, C, d) input, targets non-contiguous
    x = torch.randn(2, 7, 3, dtype=torch.float64)
    tt = torch.randint(0, 7, (3, 2)).t()
    torch.testing.assert_close(tnn.CrossEntropyLoss()(x, tt), torch.nn.CrossEntropyLoss()(x, tt))
    emb = tnn.Embedding(9, 4)
    ids = torch.randint(0, 9, (4, 3)).t()
    assert torch.equal(emb(ids), emb(ids.contiguous()))
    assert torch.equal(emb(ids), torch.nn.functional.embedding(ids, emb.weight))
    w = copy.deepcopy(emb)
    with torch.no_grad():  # a non-contiguous weight
        w.weight = torch.nn.Parameter(emb.weight.detach().t().contiguous().t())
    assert torch.equal(w(ids), emb(ids))
