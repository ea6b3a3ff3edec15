"""torchclad.function: C++ kernels as differentiable torch.library custom ops (split mode)."""

from __future__ import annotations

import gc
import time
import weakref

import pytest
import torch

import torchclad
from torchclad.bridge import op as ops

MUL_TANH = r"""
#include <cmath>
// N = number of elements
template <typename T>
void mul_tanh(T* out, const T* a, const T* b, T alpha, int N) {
  for (int i = 0; i < N; i++) out[i] = a[i] * std::tanh(b[i]) + alpha * a[i] * a[i];
}
"""
ALPHA = 0.25

SIN_COS = r"""
#include <cmath>
void sin_cos(double* s, double* c, const double* x, int N) {
  for (int i = 0; i < N; i++) {
    s[i] = std::sin(x[i]);
    c[i] = x[i] * std::cos(x[i]);
  }
}
"""

CUBE_INPLACE = r"""
void cube_inplace(double* x, int N) {
  for (int i = 0; i < N; i++) x[i] = x[i] * x[i] * x[i];
}
"""

SUMEXP = r"""
#include <cmath>
template <typename T>
T sumexp(const T* x, int N) {
  T s = 0;
  for (int i = 0; i < N; i++) s += std::exp(x[i]);
  return s;
}
"""

EMBED = r"""
// N = number of tokens, C = channels; wte is (V, C), idx is (N), out is (N, C)
template <typename T>
void embed(T* out, const T* wte, const int* idx, int N, int C) {
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++) out[n * C + c] = wte[idx[n] * C + c];
}
"""


def _numel(*xs):
    return xs[0].numel()


def _shape(*xs):
    return xs[0].shape


@pytest.fixture(scope="module")
def mul_tanh():
    return torchclad.function(MUL_TANH, "mul_tanh", inputs=["a", "b"], outputs={"out": _shape},
                              sizes={"N": _numel, "alpha": lambda a, b: ALPHA})


def ref_mul_tanh(a, b):
    return a * torch.tanh(b) + ALPHA * a * a


def _pair(shape=(3, 4), dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(shape, dtype=dtype, generator=g).requires_grad_()
    b = torch.randn(shape, dtype=dtype, generator=g).requires_grad_()
    return a, b


# ---- values and gradients


def test_is_a_custom_op(mul_tanh):
    assert isinstance(mul_tanh, torch._library.custom_ops.CustomOpDef)
    assert mul_tanh._namespace == "torchclad"


def test_gradcheck_float64(mul_tanh):
    assert torch.autograd.gradcheck(mul_tanh, _pair())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_torch(mul_tanh, dtype):
    a, b = _pair((2, 3, 5), dtype)
    y = mul_tanh(a, b)
    assert y.dtype == dtype and y.shape == a.shape
    gy = torch.randn_like(y)
    ga, gb = torch.autograd.grad(y, (a, b), gy)
    ry = ref_mul_tanh(a, b)
    ra, rb = torch.autograd.grad(ry, (a, b), gy)
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(y, ry, **tol)
    torch.testing.assert_close(ga, ra, **tol)
    torch.testing.assert_close(gb, rb, **tol)


def test_noncontiguous_inputs(mul_tanh):
    a0, b0 = _pair((6, 4))
    a, b = a0.t(), b0[::2]
    b = torch.cat([b, b]).t()
    assert not a.is_contiguous() and not b.is_contiguous()
    y = mul_tanh(a, b)
    torch.testing.assert_close(y, ref_mul_tanh(a, b))
    assert torch.autograd.gradcheck(mul_tanh, (a.detach().requires_grad_(), b.detach().requires_grad_()))


def test_zero_size(mul_tanh):
    a, b = _pair((0, 3))
    y = mul_tanh(a, b)
    assert y.shape == (0, 3)
    y.sum().backward()
    assert a.grad.shape == (0, 3) and b.grad.shape == (0, 3)


def test_inputs_and_outputs_untouched_by_backward(mul_tanh):
    a, b = _pair()
    a_before, b_before = a.detach().clone(), b.detach().clone()
    y = mul_tanh(a, b)
    y_before = y.detach().clone()
    y.backward(torch.ones_like(y))
    assert torch.equal(a, a_before) and torch.equal(b, b_before) and torch.equal(y, y_before)


# ---- the torch.library contract


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_opcheck(mul_tanh, dtype):
    a, b = _pair((4, 3), dtype)
    torch.library.opcheck(mul_tanh, (a, b))


def test_compile_fullgraph(mul_tanh):
    def f(a, b):
        return (mul_tanh(a.sin(), b) * 2).cos().sum()

    compiled = torch.compile(f, fullgraph=True)
    for shape in [(3, 4), (5, 2)]:
        a, b = _pair(shape)
        ga, gb = torch.autograd.grad(compiled(a, b), (a, b))
        ra, rb = torch.autograd.grad(f(a, b), (a, b))
        torch.testing.assert_close(ga, ra)
        torch.testing.assert_close(gb, rb)


def test_double_backward_is_generated_and_third_order_refused(mul_tanh):
    # (issue "Every derivative from one kernel": the backward is itself differentiable,
    # forward over reverse; tests/test_higher_order.py covers the rest of the contract)
    a, b = _pair()
    assert torch.autograd.gradgradcheck(mul_tanh, (a, b))
    (ga,) = torch.autograd.grad(mul_tanh(a, b).sum(), (a,), create_graph=True)
    (gaa,) = torch.autograd.grad(ga.sum(), (a,), create_graph=True)
    with pytest.raises(RuntimeError, match="third derivative is not supported"):
        gaa.sum().backward()


# ---- errors


def test_device_and_dtype_errors_name_the_argument(mul_tanh):
    a, b = _pair()
    with pytest.raises(ValueError, match="input 'b' is on meta.*CPU only"):
        mul_tanh(a, b.detach().to("meta"))
    with pytest.raises(TypeError, match="input 'a' is a float16 tensor"):
        mul_tanh(a.detach().half(), b.detach().half())
    with pytest.raises(TypeError, match="input 'b' is float32 but 'a' is float64"):
        mul_tanh(a, b.detach().float())


def test_spec_errors():
    kw = dict(outputs={"out": _shape}, sizes={"N": _numel, "alpha": lambda a, b: 1.0})
    with pytest.raises(ValueError, match="'x' is not a parameter"):
        torchclad.function(MUL_TANH, "mul_tanh", inputs=["a", "x"], **kw)
    with pytest.raises(ValueError, match="'N' .* is a scalar"):
        torchclad.function(MUL_TANH, "mul_tanh", inputs=["a", "b", "N"], **kw)
    with pytest.raises(ValueError, match="'b' is in neither inputs nor outputs"):
        torchclad.function(MUL_TANH, "mul_tanh", inputs=["a"], **kw)
    with pytest.raises(ValueError, match="scalar parameter 'alpha' has no value"):
        torchclad.function(MUL_TANH, "mul_tanh", inputs=["a", "b"], outputs={"out": _shape},
                           sizes={"N": _numel})
    with pytest.raises(ValueError, match="'a' .* is a const pointer"):
        torchclad.function(MUL_TANH, "mul_tanh", inputs=["b"], outputs={"out": _shape, "a": _shape},
                           sizes=kw["sizes"])


# ---- split mode: the tape


def _count_forwards(op, monkeypatch):
    """The forwards the op runs, True for a recording one: Python's (``run_forward``, the
    registered op and the Python lane) and the C++ eager path's (its entry-point counters)."""
    kop = ops.kernel_op(op)
    calls = []
    real = kop.run_forward

    def counting(ins, record):
        calls.append(record)
        return real(ins, record)

    monkeypatch.setattr(kop, "run_forward", counting)
    start = kop.fast.stats() if kop.fast is not None else {}

    def counted():
        if kop.fast is not None:
            now = kop.fast.stats()
            calls.extend([False] * (now["forward"] - start["forward"])
                         + [True] * (now["recording_forward"] - start["recording_forward"]))
            start.update(now)
        return calls
    return counted


def test_backward_runs_only_the_reverse_sweep(mul_tanh, monkeypatch):
    calls = _count_forwards(mul_tanh, monkeypatch)
    a, b = _pair()
    mul_tanh(a, b).sum().backward()
    assert calls() == [True]  # one recorded forward, no recomputation in backward
    calls().clear()
    compiled = torch.compile(lambda a, b: mul_tanh(a.exp(), b).sum(), fullgraph=True)
    compiled(a, b).backward()
    assert calls() == [True]


def test_backward_twice_recomputes_and_agrees(mul_tanh, monkeypatch):
    calls = _count_forwards(mul_tanh, monkeypatch)
    a, b = _pair()
    y = mul_tanh(a, b)
    g1 = torch.autograd.grad(y.sum(), (a, b), retain_graph=True)
    g2 = torch.autograd.grad(y.sum(), (a, b))
    torch.testing.assert_close(g1, g2, rtol=0, atol=0)
    assert calls() == [True, True]


# (the registered op itself, torch.ops.torchclad.<op>: what torch.compile and opcheck run; a
# plain eager call takes the fast lane, whose records the autograd node holds)


def test_no_tape_without_autograd(mul_tanh):
    a, b = _pair()
    op = ops.kernel_op(mul_tanh).overload
    with torch.inference_mode():
        y = op(a, b)
    assert getattr(y.untyped_storage(), ops.RECORD_ATTR, None) is None
    y = op(a.detach(), b.detach())
    assert getattr(y.untyped_storage(), ops.RECORD_ATTR, None) is None


def test_tape_freed_when_backward_never_runs(mul_tanh):
    a, b = _pair((64,))
    y = ops.kernel_op(mul_tanh).overload(a, b)
    r = weakref.ref(getattr(y.untyped_storage(), ops.RECORD_ATTR))
    z = (y * 3).sum()  # graph alive, backward never called
    del y
    gc.collect()
    assert r() is not None  # saved by the graph
    del z
    gc.collect()
    assert r() is None


# ---- more kernel shapes: several outputs, in-out, a return value, integer inputs


def test_two_outputs():
    f = torchclad.function(SIN_COS, "sin_cos", inputs=["x"],
                           outputs={"s": _shape, "c": _shape}, sizes={"N": _numel})
    x = torch.randn(7, dtype=torch.float64, requires_grad=True)
    s, c = f(x)
    torch.testing.assert_close(s, x.sin())
    torch.testing.assert_close(c, x * x.cos())
    assert torch.autograd.gradcheck(lambda x: f(x), (x,))
    (gx,) = torch.autograd.grad(f(x)[1].sum(), (x,))  # one output unused
    torch.testing.assert_close(gx, x.cos() - x * x.sin())
    torch.library.opcheck(f, (x,))


def test_in_out_parameter():
    f = torchclad.function(CUBE_INPLACE, "cube_inplace", inputs=["x"], outputs={"x": _shape},
                           sizes={"N": _numel})
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    x_before = x.detach().clone()
    y = f(x)
    assert torch.equal(x.detach(), x_before)
    torch.testing.assert_close(y, x_before ** 3)
    assert torch.autograd.gradcheck(f, (x,))
    torch.library.opcheck(f, (x,))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_return_value_is_an_output(dtype):
    f = torchclad.function(SUMEXP, "sumexp", inputs=["x"], outputs={}, sizes={"N": _numel})
    x = torch.randn(2, 3, dtype=dtype, requires_grad=True)
    s = f(x)
    assert s.shape == () and s.dtype == dtype
    torch.testing.assert_close(s, x.exp().sum())
    (gx,) = torch.autograd.grad(s * 3, (x,))
    torch.testing.assert_close(gx, 3 * x.exp())
    if dtype == torch.float64:
        assert torch.autograd.gradcheck(f, (x,))
    torch.library.opcheck(f, (x,))


def test_integer_index_input():
    f = torchclad.function(
        EMBED, "embed", inputs=["wte", "idx"],
        outputs={"out": lambda wte, idx: (*idx.shape, wte.shape[1])},
        sizes={"N": lambda wte, idx: idx.numel(), "C": lambda wte, idx: wte.shape[1]},
    )
    wte = torch.randn(10, 4, dtype=torch.float64, requires_grad=True)
    idx = torch.tensor([[1, 3, 3], [0, 9, 1]], dtype=torch.int32)
    out = f(wte, idx)
    torch.testing.assert_close(out, wte[idx.long()])
    assert torch.autograd.gradcheck(lambda w: f(w, idx), (wte,))
    torch.library.opcheck(f, (wte, idx))
    with pytest.raises(TypeError, match="input 'idx'.*int32.*int64"):
        f(wte, idx.long())


# ---- overhead


def test_per_call_overhead_vs_plain_autograd_function(mul_tanh, capsys):
    """Prints the per-call cost of the custom-op bridge; no timing assertion."""
    k = ops.kernel_op(mul_tanh).k

    class Plain(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            out = torch.zeros_like(a)
            tape = k.new_tape()
            k.binding("reverse_forw", "double")(out.data_ptr(), a.data_ptr(), b.data_ptr(),
                                                ALPHA, a.numel(), tape)
            ctx.tape = tape
            ctx.save_for_backward(a, b, out)
            return out

        @staticmethod
        def backward(ctx, g):
            a, b, out = ctx.saved_tensors
            bufs = {"out": g.contiguous().clone(), "a": torch.zeros_like(a), "b": torch.zeros_like(b),
                    "alpha": torch.zeros((), dtype=a.dtype)}
            k.binding("reverse_sweep", "double")(out.data_ptr(), a.data_ptr(), b.data_ptr(), ALPHA,
                                                 a.numel(), *[bufs[w].data_ptr() for w in k.wrt],
                                                 ctx.tape)
            return bufs["a"], bufs["b"]

    a, b = _pair((64,))
    torch.testing.assert_close(torch.autograd.grad(Plain.apply(a, b).sum(), (a, b)),
                               torch.autograd.grad(mul_tanh(a, b).sum(), (a, b)))

    def per_call(fn, reps=300):
        for _ in range(20):
            fn(a, b).sum().backward()
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(reps):
                fn(a, b).sum().backward()
            best = min(best, (time.perf_counter() - t0) / reps * 1e6)
        return best

    t_torch = per_call(ref_mul_tanh)
    t_plain = per_call(Plain.apply)
    t_op = per_call(mul_tanh)
    with capsys.disabled():
        print(f"\n[torchclad overhead] fwd+bwd per call, 64 float64 elements: "
              f"torch ops {t_torch:.1f} us, plain autograd.Function {t_plain:.1f} us, "
              f"torchclad custom op {t_op:.1f} us (overhead vs plain {t_op - t_plain:+.1f} us)")
