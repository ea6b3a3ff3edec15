"""Ops made by torchclad.function carry the whole contract (issue "Every derivative from one
kernel"): gradcheck, gradgradcheck, torch.autograd.forward_ad dual numbers, torch.func.jvp /
jacfwd / jacrev / hessian / vmap, opcheck on every op, and what torch.compile allows -- on a
user kernel with loops, arrays, a custom derivative, an OpenMP loop and an early return, in
float64 against a plain-torch equivalent (gradcheck and gradgradcheck against finite
differences)."""
from __future__ import annotations

import pytest
import torch
from torch.autograd import forward_ad as fwAD

import torchclad
from torchclad.bridge.op import kernel_op

D = torch.float64

SRC = r"""
#include <torchclad/runtime.h>
#include <cmath>
double soft(double v) { return std::log1p(std::exp(v)); }       // softplus
namespace clad {
namespace custom_derivatives {
void soft_pullback(double v, double _d_y, double* _d_v) { *_d_v += _d_y / (1.0 + std::exp(-v)); }
::clad::ValueAndPushforward<double, double> soft_pushforward(double v, double _d_v) {
  return {soft(v), _d_v / (1.0 + std::exp(-v))};
}
}  // namespace custom_derivatives
}  // namespace clad

// y = softplus(x w) + sin(x) (OpenMP), s = sum y x (a loop), nothing for n <= 0
void kernel(const double* x, const double* w, double* y, double* s, int n) {
  if (n <= 0) return;
  #pragma omp parallel for
  for (int i = 0; i < n; i++) y[i] = soft(x[i] * w[i]) + std::sin(x[i]);
  double acc = 0;
  for (int i = 0; i < n; i++) acc += y[i] * x[i];
  s[0] = acc;
}
"""


def ref(x, w):
    y = torch.nn.functional.softplus(x * w) + torch.sin(x)
    return y, (y * x).sum().reshape(1)


@pytest.fixture(scope="module")
def op():
    return torchclad.function(SRC, "kernel", inputs=["x", "w"],
                              outputs={"y": lambda x, w: x.shape, "s": lambda x, w: (1,)},
                              sizes={"n": lambda x, w: x.numel()})


def _xw(n=5, grad=False):
    g = torch.Generator().manual_seed(n)
    x = torch.rand(n, dtype=D, generator=g) - 0.5
    w = torch.rand(n, dtype=D, generator=g) + 0.5
    return x.requires_grad_(grad), w.requires_grad_(grad)


def _close(a, b):
    if isinstance(a, (tuple, list)):
        return all(_close(p, q) for p, q in zip(a, b)) and len(a) == len(b)
    return torch.allclose(a, b, rtol=1e-10, atol=1e-12)


def test_gradcheck_and_gradgradcheck(op):
    x, w = _xw(grad=True)
    assert torch.autograd.gradcheck(op, (x, w))
    assert torch.autograd.gradgradcheck(op, (x, w))


def test_double_backward_matches_torch(op):
    x, w = _xw(grad=True)
    (gx,) = torch.autograd.grad(op(x, w)[1].sum(), x, create_graph=True)
    (hx,) = torch.autograd.grad((gx * gx).sum(), w)
    x2, w2 = x.detach().requires_grad_(), w.detach().requires_grad_()
    (gr,) = torch.autograd.grad(ref(x2, w2)[1].sum(), x2, create_graph=True)
    (hr,) = torch.autograd.grad((gr * gr).sum(), w2)
    assert _close(gx, gr) and _close(hx, hr)


def test_forward_ad_dual_numbers(op):
    x, w = _xw()
    v, u = torch.rand_like(x), torch.rand_like(w)
    want = torch.func.jvp(ref, (x, w), (v, u))[1]
    with fwAD.dual_level():
        y, s = op(fwAD.make_dual(x, v), fwAD.make_dual(w, u))
        got = (fwAD.unpack_dual(y).tangent, fwAD.unpack_dual(s).tangent)
    assert _close(got, want)


def test_torch_func_jvp_jacfwd_jacrev(op):
    x, w = _xw()
    v, u = torch.rand_like(x), torch.rand_like(w)
    assert _close(torch.func.jvp(op, (x, w), (v, u)), torch.func.jvp(ref, (x, w), (v, u)))
    assert _close(torch.func.jacfwd(op, argnums=(0, 1))(x, w),
                  torch.func.jacfwd(ref, argnums=(0, 1))(x, w))
    assert _close(torch.func.jacrev(op, argnums=(0, 1))(x, w),
                  torch.func.jacrev(ref, argnums=(0, 1))(x, w))


def test_torch_func_hessian(op):
    x, w = _xw()

    def loss(f):
        return lambda a, b: (f(a, b)[0] ** 2).sum() + f(a, b)[1].sum()

    assert _close(torch.func.hessian(loss(op), argnums=(0, 1))(x, w),
                  torch.func.hessian(loss(ref), argnums=(0, 1))(x, w))


def test_vmap_loops_over_a_leading_batch(op):
    X = torch.rand(3, 5, dtype=D)
    W = torch.rand(3, 5, dtype=D)
    _, w = _xw()
    assert _close(torch.func.vmap(op, in_dims=(0, None))(X, w),
                  torch.func.vmap(ref, in_dims=(0, None))(X, w))
    assert _close(torch.func.vmap(op, in_dims=(1, 0))(X.T.contiguous(), W),
                  torch.func.vmap(ref, in_dims=(1, 0))(X.T.contiguous(), W))
    per_sample = torch.func.vmap(torch.func.grad(lambda a, b: op(a, b)[1].sum()),
                                 in_dims=(0, None))
    per_ref = torch.func.vmap(torch.func.grad(lambda a, b: ref(a, b)[1].sum()),
                              in_dims=(0, None))
    assert _close(per_sample(X, w), per_ref(X, w))


def test_early_return_has_zero_derivatives(op):
    x = torch.zeros(0, dtype=D)
    y, s = op(x, x)
    assert y.numel() == 0 and s.item() == 0.0
    assert torch.func.jvp(op, (x, x), (x, x))[1][1].item() == 0.0


def test_opcheck_every_op(op):
    k = kernel_op(op)
    x, w = _xw(grad=True)
    y, s = op(x, w)
    g = (torch.rand_like(y), torch.rand_like(s))
    v = (torch.rand_like(x), torch.rand_like(w))
    for o, args in ((op, (x, w)),
                    (k.backward_op, (x, w, y.detach(), s.detach(), *g)),
                    (k.higher.jvp_op, (x, w, *v)),
                    (k.higher.hvp_op, (x.detach(), w.detach(), *g, *v))):
        result = torch.library.opcheck(o, args)
        assert set(result.values()) == {"SUCCESS"}, (o, result)


def test_third_order_is_refused_clearly(op):
    x, w = _xw(grad=True)
    (gx,) = torch.autograd.grad(op(x, w)[1].sum(), x, create_graph=True)
    (hx,) = torch.autograd.grad(gx.sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="third derivative is not supported"):
        torch.autograd.grad(hx.sum(), x)


def test_compile_forward_and_backward(op):
    x, w = _xw(grad=True)
    step = torch.compile(lambda a, b: op(a, b)[1].sum(), fullgraph=True)
    step(x, w).backward()
    x2, w2 = x.detach().requires_grad_(), w.detach().requires_grad_()
    ref(x2, w2)[1].sum().backward()
    assert _close((x.grad, w.grad), (x2.grad, w2.grad))


def test_compile_vmap_of_the_custom_op(op):
    X, _ = _xw()
    X = X.reshape(1, -1).repeat(2, 1)
    _, w = _xw()
    raw = torch.ops.torchclad.__getattr__(kernel_op(op).opname)
    got = torch.compile(lambda a, b: torch.func.vmap(raw, in_dims=(0, None))(a, b),
                        fullgraph=True)(X, w)
    assert _close(got, torch.func.vmap(ref, in_dims=(0, None))(X, w))


def test_compile_refuses_jvp_with_a_clear_error(op):
    # torch 2.13 cannot trace an autograd.Function's jvp (and a custom op alone has no forward
    # derivative, so its jvp would silently be zero): torchclad refuses
    x, w = _xw()
    f = torch.compile(lambda a, b: torch.func.jvp(op, (a, b), (a, b))[1][1], fullgraph=True)
    with pytest.raises(Exception, match="not supported inside torch.compile"):
        f(x, w)


def test_compile_double_backward_is_refused_by_torch(op):
    # torch.compile does not trace torch.autograd.grad (trace_autograd_ops is off by default),
    # for plain torch ops alike: double backward runs eagerly
    def dd(a, b):
        (g,) = torch.autograd.grad(op(a, b)[1].sum(), a, create_graph=True)
        return g.sum()

    x, w = _xw(grad=True)
    with pytest.raises(Exception, match="autograd.grad"):
        torch.compile(dd, fullgraph=True)(x, w)


ROWS = r"""
#include <cmath>
// out[n][c] = tanh(x[n][c] w[c]): every row reads all of w, so the parallel reverse sums d w in
// partial sums, one per chunk of rows (torchclad::par_combine)
void rows(double* out, const double* x, const double* w, int N, int C) {
  #pragma omp parallel for
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++) out[n * C + c] = std::tanh(x[n * C + c] * w[c]);
}
"""


def test_second_order_through_the_partial_sums_of_a_parallel_reverse():
    """Forward over a pullback whose chunk pointer picks its partial sums or the adjoint
    itself (`T* _d_w = many ? _t.data() + c * C : _d_w0`): the tangents follow the same
    choice and are combined like the values."""
    assert "par_combine" in torchclad.gradient(ROWS, "rows", "x, w").source
    op = torchclad.function(ROWS, "rows", inputs=["x", "w"], outputs={"out": lambda x, w: x.shape},
                            sizes={"N": lambda x, w: x.shape[0], "C": lambda x, w: x.shape[1]})
    g = torch.Generator().manual_seed(2)
    x = torch.rand(6, 3, dtype=D, generator=g) - 0.5
    w = torch.rand(3, dtype=D, generator=g) + 0.5
    assert torch.autograd.gradgradcheck(op, (x.requires_grad_(), w.requires_grad_()))
    seed = torch.rand(6, 3, dtype=D, generator=g)

    def loss(f):
        return lambda a, b: (f(a, b) * seed).sum()

    ref = lambda a, b: torch.tanh(a * b)
    assert _close(torch.func.hessian(loss(op), argnums=(0, 1))(x.detach(), w.detach()),
                  torch.func.hessian(loss(ref), argnums=(0, 1))(x.detach(), w.detach()))


def test_forward_ops_compile_like_user_kernels(op):
    """The jvp / hvp module (pybind11) is built with the flags of a user kernel on this CPU:
    the vector-math declarations and libmvec, the alias-check limit, the ISA variant's flags
    (toolchain.jit.native_flags) -- not the bare package flags (GELU's JVP was 3.7x torch)."""
    from pathlib import Path

    from torchclad.toolchain.jit import native_flags

    k = kernel_op(op)
    module = k.higher.kernel().module
    prelude, cflags, ldflags = native_flags()
    entry = Path(module.__torchclad_source__).parent
    argv = (entry / "build.log").read_text().splitlines()[0].split()
    assert [f for f in cflags + ldflags if f not in argv] == []
    assert (entry / "source.cpp").read_text().startswith(prelude)
