"""Every torchclad.nn module carries forward mode and second order (issue "Every derivative from
one kernel"): gradgradcheck (finite differences in float64), torch.autograd.forward_ad dual
numbers, torch.func.jvp / jacfwd / jacrev / hessian / vmap, each against the plain-torch
module with the same weights. The jvp and the double backward of a layer are generated from
its kernel (f_pushforward, f_pullback_pushforward), compiled on first use. The fused GPT-2
refuses higher order with a clear error."""
from __future__ import annotations

import pytest
import torch
from torch.autograd import forward_ad as fwAD
from torch.func import functional_call

import torchclad.nn as tnn
from torchclad.testing import ReferenceGPT2

D = torch.float64
TINY = dict(block_size=8, vocab_size=11, n_layer=2, n_head=2, n_embd=8)


class Cfg:
    n_embd, n_head, block_size, bias, dropout = 8, 2, 8, True, 0.0


def _pair(ours: torch.nn.Module, ref: torch.nn.Module, seed: int = 0):
    torch.manual_seed(seed)
    ours = ours.to(D)
    with torch.no_grad():
        for p in ours.parameters():
            p.uniform_(-0.5, 0.5)
    ref = ref.to(D)
    ref.load_state_dict(ours.state_dict())
    return ours, ref


def _module_case(ours, ref, x, params=()):
    """(f, g, inputs): the two modules as functions of (x, *the named parameters)."""
    def call(m):
        def f(inp, *ps):
            return functional_call(m, dict(zip(params, ps)), (inp,))
        return f
    sd = dict(ours.named_parameters())
    return call(ours), call(ref), (x,) + tuple(sd[p].detach().clone() for p in params)


def _reference_attention(m):
    def f(x):
        B, T, C = x.shape
        q, k, v = torch.nn.functional.linear(x, m.c_attn.weight, m.c_attn.bias).split(C, dim=2)
        heads = lambda t: t.view(B, T, 2, C // 2).transpose(1, 2)
        q, k, v = heads(q), heads(k), heads(v)
        att = (q @ k.transpose(-2, -1)) / (C // 2) ** 0.5
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = torch.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return torch.nn.functional.linear(y, m.c_proj.weight, m.c_proj.bias)
    return f


def _gpt2_case():
    torch.manual_seed(0)
    cfg = tnn.GPT2Config(**TINY)
    ours = tnn.GPT2(cfg).to(D)
    ref = ReferenceGPT2(cfg).to(D)
    ref.load_state_dict(ours.state_dict())
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, 11, (2, 5), generator=g)
    tgt = torch.randint(0, 11, (2, 5), generator=g)
    names = ("transformer.ln_f.weight", "transformer.h.1.mlp.c_fc.bias")
    sd = dict(ours.named_parameters())

    def call(m):
        def f(*ps):
            return functional_call(m, dict(zip(names, ps)), (idx, tgt))[1]
        return f
    return call(ours), call(ref), tuple(sd[n].detach().clone() for n in names)


def _cases():
    x = lambda *s: torch.randn(*s, dtype=D, generator=torch.Generator().manual_seed(7))
    ln, rln = _pair(tnn.LayerNorm(4), torch.nn.LayerNorm(4))
    lin, rlin = _pair(tnn.Linear(4, 3), torch.nn.Linear(4, 3))
    att, ratt = _pair(tnn.CausalSelfAttention(Cfg), tnn.CausalSelfAttention(Cfg))
    mlp, rmlp = _pair(tnn.MLP(Cfg), tnn.MLP(Cfg))
    emb, remb = _pair(tnn.Embedding(7, 4), torch.nn.Embedding(7, 4))
    idx = torch.tensor([[1, 3, 6], [0, 2, 2]])
    tgt = torch.tensor([1, 0, 3, 2])
    mlp_ref = lambda a: torch.nn.functional.linear(torch.nn.functional.gelu(
        torch.nn.functional.linear(a, rmlp.c_fc.weight, rmlp.c_fc.bias), approximate="tanh"),
        rmlp.c_proj.weight, rmlp.c_proj.bias)
    return {
        "GELU-tanh": (tnn.GELU("tanh"),
                      lambda a: torch.nn.functional.gelu(a, approximate="tanh"), (x(2, 3, 4),)),
        "GELU": (tnn.GELU(), torch.nn.functional.gelu, (x(2, 3, 4),)),
        "Softmax": (tnn.Softmax(dim=1), lambda a: torch.softmax(a, 1), (x(2, 3, 4),)),
        "LayerNorm": _module_case(ln, rln, x(2, 3, 4), ("weight", "bias")),
        "Linear": _module_case(lin, rlin, x(2, 3, 4), ("weight", "bias")),
        "Embedding": (lambda w: functional_call(emb, {"weight": w}, (idx,)),
                      lambda w: functional_call(remb, {"weight": w}, (idx,)),
                      (emb.weight.detach().clone(),)),
        "CrossEntropyLoss": (lambda a: tnn.CrossEntropyLoss()(a, tgt),
                             lambda a: torch.nn.CrossEntropyLoss()(a, tgt), (x(4, 5),)),
        "CausalSelfAttention": (att, _reference_attention(att), (x(2, 4, 8),)),
        "MLP": (mlp, mlp_ref, (x(2, 3, 8),)),
        "GPT2": _gpt2_case(),
    }


CASES = _cases()
NAMES = list(CASES)


def _close(a, b):
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_close(p, q) for p, q in zip(a, b))
    return torch.allclose(a, b, rtol=1e-9, atol=1e-11)


def _tangents(inputs):
    g = torch.Generator().manual_seed(3)
    return tuple(torch.randn(t.shape, dtype=t.dtype, generator=g) for t in inputs)


@pytest.mark.parametrize("name", NAMES)
def test_gradgradcheck(name):
    f, _, inputs = CASES[name]
    ins = tuple(t.clone().requires_grad_() for t in inputs)
    assert torch.autograd.gradgradcheck(f, ins)


@pytest.mark.parametrize("name", NAMES)
def test_forward_ad_dual_numbers(name):
    f, g, inputs = CASES[name]
    ts = _tangents(inputs)
    with fwAD.dual_level():
        out = f(*[fwAD.make_dual(t, v) for t, v in zip(inputs, ts)])
        got = fwAD.unpack_dual(out).tangent
    assert _close(got, torch.func.jvp(g, inputs, ts)[1])


@pytest.mark.parametrize("name", NAMES)
def test_func_jvp_jacfwd_jacrev(name):
    f, g, inputs = CASES[name]
    ts = _tangents(inputs)
    assert _close(torch.func.jvp(f, inputs, ts), torch.func.jvp(g, inputs, ts))
    argnums = tuple(range(len(inputs)))
    assert _close(torch.func.jacfwd(f, argnums=argnums)(*inputs),
                  torch.func.jacfwd(g, argnums=argnums)(*inputs))
    assert _close(torch.func.jacrev(f, argnums=argnums)(*inputs),
                  torch.func.jacrev(g, argnums=argnums)(*inputs))


@pytest.mark.parametrize("name", NAMES)
def test_func_hessian(name):
    f, g, inputs = CASES[name]
    w = torch.randn_like(f(*inputs), generator=torch.Generator().manual_seed(5)) \
        if f(*inputs).dim() else None

    def loss(h):
        return lambda *a: (h(*a) * w).sum() if w is not None else h(*a)

    argnums = tuple(range(len(inputs)))
    # the reference by plain double backward, one row at a time: torch.func.hessian and
    # jacrev(jacrev) of torch.nn.LayerNorm get the input/weight cross terms wrong in torch 2.13
    # (finite differences agree with ours and with this, see the test below)
    H = torch.func.hessian(loss(f), argnums=argnums)(*inputs)
    want = _hessian_by_double_backward(loss(g), inputs)
    for i in argnums:
        for j in argnums:
            assert _close(H[i][j].reshape(want[i][j].shape), want[i][j]), (i, j)


def _hessian_by_double_backward(loss, inputs):
    """H[i][j] = d(grad_i)/d(input_j) as (numel_i, numel_j) matrices, by torch.autograd.grad."""
    ins = [t.clone().requires_grad_() for t in inputs]
    grads = torch.autograd.grad(loss(*ins), ins, create_graph=True)
    H = [[[] for _ in ins] for _ in ins]
    for i, gi in enumerate(grads):
        for k in range(gi.numel()):
            row = torch.autograd.grad(gi.reshape(-1)[k], ins, retain_graph=True,
                                      allow_unused=True) if gi.requires_grad else [None] * len(ins)
            for j, r in enumerate(row):
                H[i][j].append(torch.zeros_like(ins[j]).reshape(-1) if r is None
                               else r.reshape(-1))
    return [[torch.stack(H[i][j]) for j in range(len(ins))] for i in range(len(ins))]


@pytest.mark.parametrize("name", NAMES)
def test_vmap_over_a_leading_batch(name):
    f, g, inputs = CASES[name]
    batched = tuple(torch.stack([t, 2 * t + 0.1]) for t in inputs[:1])
    dims = (0,) + (None,) * (len(inputs) - 1)
    assert _close(torch.func.vmap(f, in_dims=dims)(*batched, *inputs[1:]),
                  torch.func.vmap(g, in_dims=dims)(*batched, *inputs[1:]))


def test_layernorm_hessian_matches_finite_differences():
    """The cross terms d(grad weight)/d x, where torch.func.hessian of torch.nn.LayerNorm is
    wrong (see test_func_hessian): ours against central differences of the first-order
    gradient."""
    f, _, (x, w, b) = CASES["LayerNorm"]
    seed = torch.randn_like(x, generator=torch.Generator().manual_seed(9))
    loss = lambda a, ww, bb: (f(a, ww, bb) * seed).sum()
    H = torch.func.hessian(loss, argnums=(0, 1))(x, w, b)[1][0].reshape(4, -1)
    grad_w = lambda a: torch.func.grad(loss, argnums=1)(a, w, b)
    h = 1e-6
    cols = []
    for k in range(x.numel()):
        e = torch.zeros_like(x)
        e.view(-1)[k] = h
        cols.append((grad_w(x + e) - grad_w(x - e)) / (2 * h))
    assert torch.allclose(H, torch.stack(cols, 1), rtol=1e-6, atol=1e-8)


def test_fused_gpt2_refuses_higher_order_clearly():
    from gpt2_helpers import require_fused

    require_fused()
    torch.manual_seed(0)
    m = tnn.GPT2(tnn.GPT2Config(**TINY), fused=True).to(D)
    idx = torch.randint(0, 11, (1, 4))
    _, loss = m(idx, idx)
    with pytest.raises(RuntimeError, match=r"GPT2\(fused=True\): double backward"):
        torch.autograd.grad(loss, m.transformer.ln_f.weight, create_graph=True)
    w = m.transformer.ln_f.weight.detach()
    f = lambda p: functional_call(m, {"transformer.ln_f.weight": p}, (idx, idx))[1]
    with pytest.raises(RuntimeError, match=r"GPT2\(fused=True\): forward AD"):
        torch.func.jvp(f, (w,), (torch.ones_like(w),))
