"""The eager fast lane of the built-in ops (torchclad.bridge.op.KernelOp.__call__): what the per-call
shortcuts must not change -- records freed, checks still raised after a cached call, the
layernorm op on (..., C) inputs, and which generated sweeps count as restoring memory."""

from __future__ import annotations

import gc
import warnings
import weakref

import pytest
import torch

import torchclad.nn as tnn
from torchclad.bridge import op as ops
from torchclad.bridge.plan import Record
from torchclad.toolchain.signature import sweep_restores
from torchclad.builtin import ops as builtin_ops


def _records_alive() -> int:
    return sum(type(r) is Record for r in gc.get_objects())


def test_forward_without_backward_frees_outputs_and_tape():
    """A forward with grad whose backward never runs: the autograd node holds the record, the
    outputs point to the node -- the record must not hold the outputs, or nothing is freed."""
    m = tnn.LayerNorm(16)
    x = torch.randn(8, 16, requires_grad=True)
    gc.collect()
    before = _records_alive()
    y = m(x)
    ref = weakref.ref(y)
    del y
    assert ref() is None  # freed by reference counting, no collection needed
    for _ in range(20):
        m(x)
    gc.collect()
    assert _records_alive() <= before


def test_cached_call_signature_still_checks():
    """A call signature seen before skips re-deriving the shapes, but a bad call always raises."""
    kop = builtin_ops.matmul_op
    x, w, b = torch.randn(4, 3), torch.randn(5, 3), torch.randn(5)
    kop(x, w, b)
    kop(x, w, b)  # cached
    with pytest.raises(ValueError, match="'weight' has shape"):
        kop(x, torch.randn(5, 2), b)
    with pytest.raises(TypeError):
        kop(x.double(), w, b)
    with pytest.raises(ValueError, match="'bias' must have shape"):
        kop(x, w, torch.randn(4))
    torch.testing.assert_close(kop(x, w, b), x @ w.T + b)


def test_index_checks_run_on_every_call():
    """Size functions that look at values (index checks) are never cached."""
    logits = torch.randn(4, 6)
    good = torch.tensor([0, 1, 5, -1])
    builtin_ops.crossentropy_op(logits, good)
    builtin_ops.crossentropy_op(logits, good)
    with pytest.raises(IndexError, match="out of range"):
        builtin_ops.crossentropy_op(logits, torch.tensor([0, 1, 6, 2]))


@pytest.mark.parametrize("shape", [(5, 8), (2, 3, 8), (8,), (0, 8), (2, 0, 8)])
def test_layernorm_op_takes_leading_dims(shape):
    """layernorm_forward reads (..., C): out has the input's shape, mean / rstd one per row."""
    x = torch.randn(shape, dtype=torch.float64)
    w, b = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    out, mean, rstd = builtin_ops.layernorm(x, w, b)
    assert out.shape == x.shape and mean.shape == rstd.shape == (x.numel() // 8,)
    ref = torch.nn.functional.layer_norm(x, (8,), w, b, 1e-5)
    torch.testing.assert_close(out, ref)


def test_layernorm_module_graph_has_no_views():
    m = tnn.LayerNorm(8)
    x = torch.randn(2, 3, 8, requires_grad=True)
    y = m(x)
    assert y.shape == x.shape
    assert "View" not in type(y.grad_fn).__name__ and "Reshape" not in type(y.grad_fn).__name__
    y.backward(torch.ones_like(y))
    ref = torch.nn.LayerNorm(8)
    xr = x.detach().clone().requires_grad_(True)
    ref(xr).backward(torch.ones_like(y))
    torch.testing.assert_close(x.grad, xr.grad, rtol=1e-4, atol=1e-5)


def test_layernorm_op_shape_errors():
    with pytest.raises(ValueError, match="at least 1 dimension"):
        builtin_ops.layernorm(torch.randn(()), torch.randn(0), torch.randn(0))
    with pytest.raises(ValueError, match="'weight' must have shape"):
        builtin_ops.layernorm(torch.randn(2, 3, 4), torch.randn(3), torch.randn(4))


def test_sweep_restores_is_the_engines_answer():
    """The sweep's own stack arrays (a local restored from the tape, lane sums) do not count;
    restoring an output does."""
    from torchclad.engine import differentiate

    own = """
    double f(double* out, const double* x, int n) {
        double buf[4] = {0, 0, 0, 0};
        double s = 0;
        for (int i = 0; i < n; i++) { buf[i % 4] = buf[i % 4] * x[i] + 1; s += buf[i % 4]; }
        for (int i = 0; i < n; i++) out[i] = s * x[i];
        return s;
    }"""
    assert not sweep_restores(differentiate(own, "f", ["x"]))
    overwrites = """
    void g(double* y, const double* w, int n) {
        for (int i = 1; i < n; i++) y[i] = y[i] * w[i] + y[i - 1];
    }"""
    assert sweep_restores(differentiate(overwrites, "g", ["y", "w"]))
    assert sweep_restores(object())     # says nothing: assume it does


def test_builtin_layernorm_sweep_does_not_restore():
    """So the bridge does not copy the outputs around the sweep (ops.KernelOp.sweep)."""
    assert not builtin_ops.layernorm_kernel_op(1e-5).sweep_restores


@pytest.mark.parametrize("make", [lambda: tnn.LayerNorm(8), lambda: tnn.Linear(8, 8),
                                  lambda: tnn.GELU("tanh")], ids=["layernorm", "linear", "gelu"])
def test_repeated_backward_same_gradients(make):
    """Input adjoints may start from earlier sweeps' seeds (zero pool): every backward of the
    same call must give bit-identical gradients, and the pooled buffers must be all zero."""
    m = make()
    x = torch.randn(3, 5, 8)
    g = torch.randn(3, 5, 8)
    grads = []
    for _ in range(4):
        xi = x.clone().requires_grad_(True)
        m(xi).backward(g)
        grads.append(xi.grad)
    for gr in grads[1:]:
        assert torch.equal(gr, grads[0])
    for kop in list(ops._ops.values()):
        for bufs in kop.buffers.zero.values():
            for b in bufs:
                assert not b.any()


def _fast(kop):
    if kop.fast is None:
        pytest.skip("no C++ lane: torchclad._C_dispatch or the CPU-specific kernels not built")
    return kop.fast


def test_cpp_lane_declines_what_is_not_plain_eager():
    """KernelOp.__call__ tries the C++ lane first; it must decline (NotImplemented) under a
    dispatch mode, a functorch transform and JIT tracing, and for a tensor subclass, so that
    those calls still reach the custom op. A Parameter is a plain tensor."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    fast = _fast(builtin_ops.gelu_op)
    x = torch.randn(4, 8)
    assert type(fast(x)) is torch.Tensor
    assert type(fast(torch.nn.Parameter(x.clone()))) is torch.Tensor
    seen = []

    def inside(v):
        seen.append(fast(v) is NotImplemented)
        return v * 2

    torch.func.vmap(inside)(x)
    torch.func.grad(lambda v: inside(v).sum())(x)
    torch.func.jvp(inside, (x,), (torch.ones_like(x),))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit.trace's own
        torch.jit.trace(inside, (x,), check_trace=False)
    assert seen == [True] * 4
    with FakeTensorMode():
        assert fast(torch.empty(4, 8)) is NotImplemented

    class Sub(torch.Tensor):
        pass

    assert fast(x.as_subclass(Sub)) is NotImplemented


def test_ops_still_right_where_the_cpp_lane_declines():
    """The same ops through the paths the C++ lane leaves to Python: vmap, forward AD, fake
    tensors, a subclass."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    op = builtin_ops.gelu_op
    x = torch.randn(3, 8, dtype=torch.float64)
    want = torch.nn.functional.gelu(x, approximate="tanh")
    torch.testing.assert_close(torch.func.vmap(op)(x), want)
    _, jvp = torch.func.jvp(op, (x,), (torch.ones_like(x),))
    torch.testing.assert_close(jvp, torch.func.jvp(
        lambda v: torch.nn.functional.gelu(v, approximate="tanh"), (x,), (torch.ones_like(x),))[1])
    with FakeTensorMode():
        assert op(torch.empty(3, 8)).shape == (3, 8)

    class Sub(torch.Tensor):
        pass

    torch.testing.assert_close(op(x.as_subclass(Sub)).as_subclass(torch.Tensor), want)


@pytest.mark.parametrize("make", [lambda: tnn.Linear(8, 6), lambda: tnn.LayerNorm(8)],
                         ids=["linear", "layernorm"])
def test_fast_lane_reads_a_parametrized_weight(make):
    """The modules' fast lane reads parameters from _parameters; a parametrization (weight
    moved out of it, behind a property) must still be what the layer uses."""
    from torch.nn.utils import parametrize

    class Double(torch.nn.Module):
        def forward(self, w):
            return 2 * w

    m = make()
    x = torch.randn(3, 8)
    plain = m(x)
    parametrize.register_parametrization(m, "weight", Double())
    assert "weight" not in m._parameters
    ref = make()
    with torch.no_grad():
        ref.weight.copy_(2 * m.parametrizations.weight.original)
        ref.bias.copy_(m.bias)
    torch.testing.assert_close(m(x), ref(x))
    assert not torch.equal(m(x), plain)


def test_fast_lane_under_functional_call():
    """torch.func.functional_call swaps the tensors in _parameters: the fast lane, which reads
    them there, computes with the swapped ones."""
    x = torch.randn(2, 4, dtype=torch.float64)
    w, b = torch.randn(3, 4, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    lin = tnn.Linear(4, 3).double()
    torch.testing.assert_close(torch.func.functional_call(lin, {"weight": w, "bias": b}, (x,)),
                               x @ w.T + b)
    ln = tnn.LayerNorm(4).double()
    torch.testing.assert_close(
        torch.func.functional_call(ln, {"weight": w[0], "bias": w[1]}, (x,)),
        torch.nn.functional.layer_norm(x, (4,), w[0], w[1]))
