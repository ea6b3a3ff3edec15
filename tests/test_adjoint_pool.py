"""The C++ eager path's adjoint buffers (csrc/dispatch/adjoint_pool.h): the incoming grad is the
sweep's seed only when nothing else can see it, and input adjoints started from earlier seeds
(the pool) are zero -- the gradients stay those of torch, and no tensor of the caller changes."""

from __future__ import annotations

import pytest
import torch

import torchclad.nn as tnn
from torchclad.builtin import ops as builtin_ops

pytestmark = pytest.mark.skipif(builtin_ops.layernorm_kernel_op(1e-5).fast is None,
                                reason="no C++ eager path for the built-in kernels here")


def _pair(C=32, dtype=torch.float64):
    torch.manual_seed(0)
    ref, tc = torch.nn.LayerNorm(C, dtype=dtype), tnn.LayerNorm(C, dtype=dtype)
    with torch.no_grad():
        for m in (ref, tc):
            m.weight.copy_(torch.linspace(0.5, 1.5, C, dtype=dtype))
            m.bias.copy_(torch.linspace(-1, 1, C, dtype=dtype))
    return ref, tc


def _grads(m, x, make_loss):
    x = x.detach().clone().requires_grad_(True)
    m.zero_grad(set_to_none=True)
    make_loss(m(x)).backward()
    return [x.grad, m.weight.grad, m.bias.grad]


@pytest.mark.parametrize("make_loss", [
    lambda y: (y * y).sum(),                 # fresh, contiguous grad: taken over
    lambda y: y.sum(),                       # an expanded grad: copied
    lambda y: (y[:, ::2] * 3).sum(),         # a grad with zeros in it
    lambda y: (y + y * 2).sum(),             # one grad, two uses
], ids=["fresh", "expanded", "strided", "shared"])
def test_gradients_match_torch_over_repeated_calls(make_loss):
    """Every backward, the first (fresh buffers) and the later ones (pooled), gives torch's."""
    ref, tc = _pair()
    x = torch.randn(6, 32, dtype=torch.float64)
    for _ in range(4):
        for a, b in zip(_grads(tc, x, make_loss), _grads(ref, x, make_loss)):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_callers_grad_is_not_modified():
    """y.backward(g): the caller holds g, so the sweep works on a copy."""
    _, tc = _pair()
    x = torch.randn(6, 32, dtype=torch.float64, requires_grad=True)
    g = torch.randn(6, 32, dtype=torch.float64)
    keep = g.clone()
    for _ in range(3):
        tc(x).backward(g)
    assert torch.equal(g, keep)


def test_retained_and_hooked_grads_are_not_modified():
    """retain_grad and a hook that keeps the grad see it intact after the backward."""
    _, tc = _pair()
    x = torch.randn(6, 32, dtype=torch.float64, requires_grad=True)
    y = tc(x)
    y.retain_grad()
    seen = []
    y.register_hook(lambda g: seen.append(g))
    (y * y).sum().backward()
    expect = 2 * y.detach()
    torch.testing.assert_close(y.grad, expect)
    torch.testing.assert_close(seen[0], expect)


def test_grad_of_a_view_output_is_not_taken():
    """A grad that shares storage with another tensor (a view) is copied, never reset in place."""
    _, tc = _pair()
    x = torch.randn(6, 32, dtype=torch.float64, requires_grad=True)
    base = torch.randn(2, 6, 32, dtype=torch.float64)
    keep = base.clone()

    class PassView(torch.autograd.Function):
        @staticmethod
        def forward(ctx, y):
            return y.clone()

        @staticmethod
        def backward(ctx, g):
            return base[1]  # a fresh view: its only reference, but base shares its storage

    PassView.apply(tc(x)).sum().backward()
    assert torch.equal(base, keep)


def test_pool_over_many_call_signatures():
    """Alternating call signatures (several pool keys) still give torch's gradients."""
    ref, tc = _pair()
    for rows in (3, 5, 3, 7, 5, 3, 9, 11, 3):
        x = torch.randn(rows, 32, dtype=torch.float64)
        loss = lambda y: (y * y).sum()  # noqa: E731
        for a, b in zip(_grads(tc, x, loss), _grads(ref, x, loss)):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_grad_reshaped_from_the_callers_tensor_is_not_modified():
    """A grad that is a view (a reshape node) of a tensor the caller holds is copied."""
    ref, tc = _pair()
    x = torch.randn(6, 32, dtype=torch.float64)
    g = torch.randn(6 * 32, dtype=torch.float64)
    keep = g.clone()
    xs = [x.clone().requires_grad_(True) for _ in range(2)]
    for m, xi in zip((tc, ref), xs):
        m.zero_grad(set_to_none=True)
        m(xi).reshape(-1).backward(g)
    assert torch.equal(g, keep)
    torch.testing.assert_close(xs[0].grad, xs[1].grad, rtol=1e-10, atol=1e-10)


def test_chain_through_reshapes_matches_torch():
    """Linear -> LayerNorm -> GELU -> Linear on (B, T, C): the grads between the ops pass through
    reshape nodes (views whose base nothing else holds) and are taken over; torch's gradients."""
    torch.manual_seed(0)
    mods = [tnn.Linear(16, 32, dtype=torch.float64), tnn.LayerNorm(32, dtype=torch.float64),
            tnn.GELU(approximate="tanh"), tnn.Linear(32, 8, dtype=torch.float64)]
    refs = [torch.nn.Linear(16, 32, dtype=torch.float64), torch.nn.LayerNorm(32, dtype=torch.float64),
            torch.nn.GELU(approximate="tanh"), torch.nn.Linear(32, 8, dtype=torch.float64)]
    for a, b in zip(mods, refs):
        b.load_state_dict(a.state_dict())
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    for _ in range(3):
        outs = []
        for seq in (torch.nn.Sequential(*mods), torch.nn.Sequential(*refs)):
            xi = x.clone().requires_grad_(True)
            seq.zero_grad(set_to_none=True)
            (seq(xi) ** 2).sum().backward()
            outs.append([xi.grad] + [p.grad for p in seq.parameters()])
        for a, b in zip(*outs):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10)
