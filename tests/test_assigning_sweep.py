"""The assigning sweep: a custom derivative's ``f_pullback_assign`` (torchclad.engine.names.
PULLBACK_ASSIGN), bound as ``f_reverse_sweep_assign`` and taken by the C++ eager backward
(csrc/dispatch/kernel_call.cpp) on uninitialised input adjoints and the grads as they come.

matmul's (csrc/custom/matmul.cpp) is the built-in one. The checks: the op takes it, every element
of each gradient is written (torch's gradients whatever the buffers held, zero sizes included),
and no tensor of the caller changes; a user kernel's custom derivative gets one the same way."""

from __future__ import annotations

import pytest
import torch

import torchclad
import torchclad.nn as tnn
from torchclad import engine as ad
from torchclad.bridge import op as ops
from torchclad.builtin import ops as builtin_ops
from torchclad.builtin import registry as kernels
from torchclad.engine.errors import DiffError

MATMUL = builtin_ops.matmul_op
pytestmark = pytest.mark.skipif(MATMUL.fast is None,
                                reason="no C++ eager path for the built-in kernels here")


def _pair(C, OC, bias, dtype):
    tc = tnn.Linear(C, OC, bias=bias, dtype=dtype)
    ref = torch.nn.Linear(C, OC, bias=bias, dtype=dtype)
    ref.load_state_dict(tc.state_dict())
    return tc, ref


def _grads(m, x, g):
    x = x.detach().clone().requires_grad_(True)
    m.zero_grad(set_to_none=True)
    m(x).backward(g)
    return [x.grad] + [p.grad for p in m.parameters()]


def test_generated_assigning_sweep_calls_the_assigning_pullback():
    spec = next(s for s in kernels.KERNELS if s.name == "matmul_forward")
    d = ad.differentiate(kernels.unit_source(spec), "matmul_forward", list(spec.wrt))
    funcs = dict(d.functions)
    assert "reverse_sweep_assign" in d.kinds
    body = funcs["matmul_forward_reverse_sweep_assign"]
    assert "clad::custom_derivatives::matmul_forward_pullback_assign(" in body
    # the accumulating sweep is still the one generated code calls
    assert "matmul_forward_pullback(" in funcs["matmul_forward_reverse_sweep"]
    # a kernel without one, not elementwise (test_assigning_sweep_generated.py) and reading
    # an output back (test_read_only_seeds.py), has no such kind
    at = next(s for s in kernels.KERNELS if s.name == "attention_forward")
    assert "reverse_sweep_assign" not in ad.differentiate(
        kernels.unit_source(at), "attention_forward", list(at.wrt)).kinds


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(3, 5, 7, 11), (1, 40, 96, 130), (0, 5, 7, 9), (2, 3, 0, 4),
                                   (2, 3, 4, 0)],
                         ids=["small", "blocks", "no-rows", "no-inputs", "no-outputs"])
@pytest.mark.filterwarnings("ignore:Initializing zero-element tensors")
def test_linear_takes_the_assigning_sweep_and_matches_torch(dtype, bias, shape):
    """Backward after backward (the allocator hands back memory holding earlier gradients, so a
    missed element would show), with the caller holding g: torch's gradients, g unchanged."""
    B, T, C, OC = shape
    torch.manual_seed(0)
    tc, ref = _pair(C, OC, bias, dtype)
    before = MATMUL.fast.stats()
    for k in range(3):
        x = torch.randn(B, T, C, dtype=dtype)
        g = torch.randn(B, T, OC, dtype=dtype) * (k + 1)
        keep = g.clone()
        ours, theirs = _grads(tc, x, g), _grads(ref, x, g)
        assert torch.equal(g, keep)
        tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-5,
                                                                               atol=1e-5)
        for a, b in zip(ours, theirs):
            torch.testing.assert_close(a, b, **tol)
    after = MATMUL.fast.stats()
    assert after["assigning_sweep"] - before["assigning_sweep"] == 3
    assert after["reverse_sweep"] - before["reverse_sweep"] == 3


def test_gradcheck_and_grads_that_are_not_contiguous():
    torch.manual_seed(0)
    tc, ref = _pair(6, 5, True, torch.float64)
    x = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w, b: builtin_ops.matmul(x, w, b),
                                    (x, tc.weight, tc.bias))
    for make_loss in (lambda y: y.sum(),                  # an expanded grad
                      lambda y: (y[:, ::2] * 3).sum(),    # zeros in it
                      lambda y: (y.t() * torch.arange(4.0, dtype=y.dtype)).sum()):
        outs = []
        for m in (tc, ref):
            xi = x.detach().clone().requires_grad_(True)
            m.zero_grad(set_to_none=True)
            make_loss(m(xi)).backward()
            outs.append([xi.grad, m.weight.grad, m.bias.grad])
        for a, b in zip(*outs):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_retained_graph_second_backward_and_accumulation():
    """retain_graph: the second backward re-runs the recording forward and gives the same
    gradients, which autograd adds into .grad (the sweep's buffers are the node's outputs)."""
    torch.manual_seed(0)
    tc, ref = _pair(8, 3, True, torch.float64)
    x = torch.randn(5, 8, dtype=torch.float64)
    res = []
    for m in (tc, ref):
        xi = x.clone().requires_grad_(True)
        y = m(xi)
        (y * y).sum().backward(retain_graph=True)
        (y * y).sum().backward()
        res.append([xi.grad, m.weight.grad, m.bias.grad])
    for a, b in zip(*res):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


SCALE = r"""
// out[i] = w * x[i]; a custom derivative, accumulating and assigning
void scale(double* out, const double* x, const double* w, int n) {
    for (int i = 0; i < n; i++) out[i] = w[0] * x[i];
}
namespace clad { namespace custom_derivatives {
void scale_pullback(double* out, const double* x, const double* w, int n, double* _d_out,
                    double* _d_x, double* _d_w) {
    for (int i = 0; i < n; i++) {
        _d_x[i] += w[0] * _d_out[i];
        _d_w[0] += x[i] * _d_out[i];
        _d_out[i] = 0;
    }
}
void scale_pullback_assign(double* out, const double* x, const double* w, int n,
                           const double* _d_out, double* _d_x, double* _d_w) {
    double s = 0;
    for (int i = 0; i < n; i++) {
        _d_x[i] = w[0] * _d_out[i];
        s += x[i] * _d_out[i];
    }
    _d_w[0] = s;
}
}}
"""


def test_user_kernel_with_an_assigning_pullback():
    f = torchclad.function(SCALE, "scale", inputs=["x", "w"], outputs={"out": ("n",)},
                           input_shapes={"x": ("n",), "w": (1,)})
    kop = ops.kernel_op(f)
    assert kop.fast is not None, "torchclad._C_dispatch is not built (make install builds it)"
    x = torch.randn(7, dtype=torch.float64, requires_grad=True)
    w = torch.tensor([1.5], dtype=torch.float64, requires_grad=True)
    g = torch.randn(7, dtype=torch.float64)
    keep = g.clone()
    before = kop.fast.stats()
    f(x, w).backward(g)
    assert kop.fast.stats()["assigning_sweep"] - before["assigning_sweep"] == 1
    assert torch.equal(g, keep)
    torch.testing.assert_close(x.grad, 1.5 * g)
    torch.testing.assert_close(w.grad, (x.detach() * g).sum().reshape(1))
    assert torch.autograd.gradcheck(f, (x.detach().requires_grad_(), w))


def test_assigning_pullback_of_another_arity_is_an_error():
    src = SCALE.replace("void scale_pullback_assign(double* out, const double* x, "
                        "const double* w, int n,",
                        "void scale_pullback_assign(double* out, const double* x, "
                        "const double* w,")
    src = src.replace("for (int i = 0; i < n; i++) {\n        _d_x[i] = ",
                      "for (int i = 0; i < 7; i++) {\n        _d_x[i] = ")
    with pytest.raises(DiffError, match="custom derivative 'scale_pullback_assign' takes 6 "
                                        "parameters; expected 7, as 'scale_pullback'"):
        ad.differentiate(src, "scale", ["x", "w"])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("OC", [7, 130])
def test_accumulating_sweep_adds_into_the_adjoints_and_zeroes_the_seed(dtype, OC):
    """Clad's contract, the one the fused GPT-2's sweep relies on: d inp, d weight and d bias
    added into (they hold values before), d out zeroed (its d bias reduction and reset are one
    pass: matmul_bias_adjoint_reset)."""
    torch.manual_seed(1)
    BT, C = 37, 11
    x, w, b = (torch.randn(BT, C, dtype=dtype), torch.randn(OC, C, dtype=dtype),
               torch.randn(OC, dtype=dtype))
    outs, rec = MATMUL.run_forward((x, w, b), record=True)
    g = torch.randn(BT, OC, dtype=dtype)
    start = [torch.randn(BT, C, dtype=dtype), torch.randn(OC, C, dtype=dtype),
             torch.randn(OC, dtype=dtype)]
    adj = [t.clone() for t in start] + [g.clone()]
    MATMUL.run_sweep(rec, adj)
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(outs[0], x @ w.T + b, **tol)
    torch.testing.assert_close(adj[0], start[0] + g @ w, **tol)
    torch.testing.assert_close(adj[1], start[1] + g.T @ x, **tol)
    torch.testing.assert_close(adj[2], start[2] + g.sum(0), **tol)
    assert torch.equal(adj[3], torch.zeros_like(g))
