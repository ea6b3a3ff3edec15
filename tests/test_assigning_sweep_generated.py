"""The generated assigning sweep of an elementwise kernel (torchclad/engine/reverse/assign.py).

The engine derives ``f_reverse_sweep_assign`` from a one-loop elementwise kernel's sweep: each
input adjoint element assigned once (``_d_inp[i] = ...``), the seeds only read (no reset). The
C++ eager backward takes it on uninitialised input adjoints when the buffer has as many
elements as the size argument says (else zeroed ones) and passes the caller's grads uncopied.
The checks: which kernels get one (and which must not), gradients equal to the accumulating
sweep's and to torch's whatever the buffers held, the caller's grad unchanged, and a kernel
that covers only part of its arrays (the rest of the gradient stays zero)."""

from __future__ import annotations

import pytest
import torch
from nn_helpers import ATOL, RTOL

import torchclad
import torchclad.nn as tnn
from torchclad import engine as ad
from torchclad.bridge import op as ops
from torchclad.builtin import ops as builtin_ops
from torchclad.builtin import registry as kernels


def _derive(name):
    spec = next(s for s in kernels.KERNELS if s.name == name)
    return ad.differentiate(kernels.unit_source(spec), name, list(spec.wrt))


@pytest.mark.parametrize("name,extents", [
    ("gelu_forward", (("inp", "N"),)), ("gelu_erf_forward", (("inp", "N"),)),
    ("residual_forward", (("inp1", "N"), ("inp2", "N")))])
def test_elementwise_builtins_get_an_assigning_sweep(name, extents):
    d = _derive(name)
    assert "reverse_sweep_assign" in d.kinds and d.assign_extents == extents
    body = dict(d.functions)[name + "_reverse_sweep_assign"]
    for adj, _ in extents:
        assert f"_d_{adj}[i] = " in body and f"_d_{adj}[i] +=" not in body
    assert "_d_out[i] = 0" not in body and "_d_out[i]" in body
    assert "#pragma omp parallel for" in body
    # the accumulating sweep is unchanged: Clad's contract
    sweep = dict(d.functions)[name + "_reverse_sweep"]
    assert "_d_out[i] = 0" in sweep and f"_d_{extents[0][0]}[i] +=" in sweep


@pytest.mark.parametrize("name", ["layernorm_forward", "softmax_forward",
                                  "crossentropy_forward", "attention_forward"])
def test_other_builtins_assign_no_input_adjoint_elementwise(name):
    """Not elementwise: at most the sweep that only spares the seeds (input adjoints added
    into: tests/test_read_only_seeds.py), or zeroes rows itself (tests/test_owned_rows.py)."""
    d = _derive(name)
    assert all(n == "" or "*" in n for _, n in d.assign_extents)


NOT_ELEMENTWISE = {
    # an input element read twice: two additions into one adjoint element (a square alone is
    # one: test_a_square_is_one_addition_and_gets_an_assigning_sweep)
    "read_twice": "for (int i = 0; i < n; i++) out[i] = x[i] * x[i] + x[i];",
    # another iteration's element
    "neighbour": "for (int i = 0; i < n; i++) out[i] = x[i] + x[(i + 1) % n];",
    # a strided element: not every element of d x is written
    "strided": "for (int i = 0; i < n; i++) out[i] = x[2 * i];",
    # the output read back: its adjoint is added to
    "reads_output": "for (int i = 0; i < n; i++) { out[i] = x[i]; out[i] = out[i] * 3.0; }",
    # a branch
    "branch": "for (int i = 0; i < n; i++) { if (x[i] > 0) out[i] = x[i]; else out[i] = 0; }",
    # not from 0
    "offset": "for (int i = 1; i < n; i++) out[i] = 2.0 * x[i];",
    # two loops
    "two_loops": "for (int i = 0; i < n; i++) out[i] = x[i];\n"
                 "    for (int i = 0; i < n; i++) out[i] = 2.0 * x[i];",
}


@pytest.mark.parametrize("case", sorted(NOT_ELEMENTWISE))
def test_no_assigning_sweep_where_it_could_differ(case):
    """No input adjoint assigned. Where the output is still written once per element, the
    sweep that only spares the seeds remains (it adds into d x: extent "")."""
    src = f"void f(double* out, const double* x, int n) {{\n    {NOT_ELEMENTWISE[case]}\n}}\n"
    d = ad.differentiate(src, "f", "x")
    body = dict(d.functions).get("f_reverse_sweep_assign", "")
    assert d.assign_extents in ((), (("x", ""),)), body
    assert "_d_x[i] = " not in body


def test_a_square_is_one_addition_and_gets_an_assigning_sweep():
    """x[i] * x[i]: the product rule merges the repeated factor into one term
    (d x += 2 * (d out * x)), so the element is written once and the variant assigns it."""
    src = "void f(double* out, const double* x, int n) {\n" \
          "    for (int i = 0; i < n; i++) out[i] = 3.0 * x[i] * x[i];\n}\n"
    d = ad.differentiate(src, "f", "x")
    assert d.assign_extents == (("x", "n"),)
    body = dict(d.functions)["f_reverse_sweep_assign"]
    assert "_d_x[i] = " in body and "_d_x[i] +=" not in body
    f = torchclad.function(src, "f", inputs=["x"], outputs={"out": ("n",)},
                           input_shapes={"x": ("n",)})
    for _ in range(3):      # recycled memory: an element not written would show
        x = torch.randn(41, dtype=torch.float64, requires_grad=True)
        g = torch.randn(41, dtype=torch.float64)
        f(x).backward(g)
        torch.testing.assert_close(x.grad, 6.0 * x.detach() * g, rtol=1e-14, atol=0)
    assert torch.autograd.gradcheck(f, (torch.randn(7, dtype=torch.float64,
                                                    requires_grad=True),))


ELEMENTWISE = r"""
#include <cmath>
void soft(double* out, const double* x, const double* y, int n) {
    for (int i = 0; i < n; i++) {
        double a = x[i];
        out[i] = std::log1p(std::exp(a)) * y[i];
    }
}
"""


def _soft_grads(x, y, g, n):
    x = x.detach().clone().requires_grad_(True)
    y = y.detach().clone().requires_grad_(True)
    out = torch.nn.functional.softplus(x[:n]) * y[:n]
    out.backward(g[:n])
    return x.grad, y.grad


def test_user_kernel_takes_it_and_matches_torch_backward_after_backward():
    f = torchclad.function(ELEMENTWISE, "soft", inputs=["x", "y"], outputs={"out": ("n",)},
                           input_shapes={"x": ("n",), "y": ("n",)})
    kop = ops.kernel_op(f)
    assert kop.fast is not None, "torchclad._C_dispatch is not built (make install builds it)"
    before = kop.fast.stats()["assigning_sweep"]
    for k in range(3):     # recycled memory: a missed element would show
        x = torch.randn(37, dtype=torch.float64, requires_grad=True)
        y = torch.randn(37, dtype=torch.float64, requires_grad=True)
        g = torch.randn(37, dtype=torch.float64) * (k + 1)
        keep = g.clone()
        f(x, y).backward(g)
        assert torch.equal(g, keep)
        gx, gy = _soft_grads(x, y, g, 37)
        torch.testing.assert_close(x.grad, gx, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(y.grad, gy, rtol=1e-12, atol=1e-12)
    assert kop.fast.stats()["assigning_sweep"] - before == 3
    x = torch.randn(9, dtype=torch.float64, requires_grad=True)
    y = torch.randn(9, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(f, (x, y))


def test_a_kernel_covering_part_of_its_arrays_leaves_the_rest_of_the_gradient_zero():
    """n = numel - 5: the sweep writes the first n elements; the bridge zero-fills the
    buffers (not the size the sweep covers), so the last 5 come out 0, not garbage."""
    f = torchclad.function(ELEMENTWISE, "soft", inputs=["x", "y"],
                           outputs={"out": lambda x, y: (x.numel(),)},
                           sizes={"n": lambda x, y: x.numel() - 5})
    kop = ops.kernel_op(f)
    before = kop.fast.stats()["assigning_sweep"]
    n = 3000      # heap-sized buffers: freed gradients come back holding their values
    for _ in range(4):
        x = torch.randn(n, dtype=torch.float64, requires_grad=True)
        y = torch.randn(n, dtype=torch.float64, requires_grad=True)
        g = torch.randn(n, dtype=torch.float64) + 3
        f(x, y).backward(g)
        gx, gy = _soft_grads(x, y, g, n - 5)
        torch.testing.assert_close(x.grad, gx, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(y.grad, gy, rtol=1e-12, atol=1e-12)
        assert torch.equal(x.grad[n - 5:], torch.zeros(5, dtype=torch.float64))
    assert kop.fast.stats()["assigning_sweep"] - before == 4


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_gelu_and_residual_modules_take_it(dtype):
    if builtin_ops.gelu_op.fast is None:
        pytest.skip("no C++ eager path for the built-in kernels here")
    torch.manual_seed(0)
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else dict(rtol=RTOL, atol=ATOL)
    ours, ref = tnn.GELU(approximate="tanh"), torch.nn.GELU(approximate="tanh")
    before = (builtin_ops.gelu_op.fast.stats()["assigning_sweep"],
              builtin_ops.residual_op.fast.stats()["handed_on"])
    for k in range(3):
        x = torch.randn(4, 33, 70, dtype=dtype)
        g = torch.randn(4, 33, 70, dtype=dtype) * (k + 1)
        keep = g.clone()
        a, b = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        ours(a).backward(g)
        ref(b).backward(g)
        torch.testing.assert_close(a.grad, b.grad, **tol)
        u, v = x.clone().requires_grad_(True), (2 * x).requires_grad_(True)
        builtin_ops.residual_op(u, v).backward(g)
        assert torch.equal(u.grad, g) and torch.equal(v.grad, g) and torch.equal(g, keep)
    after = (builtin_ops.gelu_op.fast.stats()["assigning_sweep"],
             builtin_ops.residual_op.fast.stats()["handed_on"])
    # the residual's assigning sweep would only copy d out into both: nothing runs
    assert after[0] - before[0] == 3 and after[1] - before[1] == 3


# ---- a copy of a seed (Derivative.assign_copies): the grad handed on, nothing run

COPIES = {
    "residual": ("for (int i = 0; i < n; i++) out[i] = x[i] + y[i];",
                 (("x", "out"), ("y", "out"))),
    "one_of_two": ("for (int i = 0; i < n; i++) out[i] = x[i] - 2.0 * y[i];", (("x", "out"),)),
    # d y is a copy; d x is added up in a local first (d a += d out): not followed
    "through_a_local": ("for (int i = 0; i < n; i++) { double a = x[i]; out[i] = a + y[i]; }",
                        (("y", "out"),)),
    # 1.0 * d out is d out, bit for bit (the engine drops the factor)
    "scaled": ("for (int i = 0; i < n; i++) out[i] = 1.0 * x[i] + y[i];",
               (("x", "out"), ("y", "out"))),
    "scaled_by_two": ("for (int i = 0; i < n; i++) out[i] = 2.0 * x[i] + y[i];",
                      (("y", "out"),)),
    "negated": ("for (int i = 0; i < n; i++) out[i] = y[i] - x[i];", (("y", "out"),)),
}


@pytest.mark.parametrize("case", sorted(COPIES))
def test_engine_finds_the_adjoints_that_copy_a_seed(case):
    body, copies = COPIES[case]
    src = f"void f(double* out, const double* x, const double* y, int n) {{\n    {body}\n}}\n"
    d = ad.differentiate(src, "f", ["x", "y"])
    assert d.assign_copies == copies


def test_no_copy_across_scalar_types_or_without_the_variant():
    # a float input of a double output: the adjoint converts (no copy); the built-ins
    src = "void f(double* out, const float* x, int n) { for (int i = 0; i < n; i++) out[i] = x[i]; }"
    assert ad.differentiate(src, "f", "x").assign_copies == ()
    assert _derive("residual_forward").assign_copies == (("inp1", "out"), ("inp2", "out"))
    for name in ("gelu_forward", "layernorm_forward", "encoder_forward"):
        assert _derive(name).assign_copies == ()


COPY_KERNEL = "void pass(double* out, const double* x, const double* y, int n) {\n" \
              "    for (int i = 0; i < n; i++) out[i] = x[i] + y[i];\n}\n"


def test_user_kernel_hands_the_grad_on_in_the_inputs_shape():
    """Inputs (3, 4), output (12): each input's gradient is the grad itself, reshaped, bit for
    bit; the same tensor passed twice gets twice the grad."""
    f = torchclad.function(COPY_KERNEL, "pass", inputs=["x", "y"],
                           outputs={"out": lambda x, y: (x.numel(),)},
                           sizes={"n": lambda x, y: x.numel()})
    kop = ops.kernel_op(f)
    assert kop.fast is not None, "torchclad._C_dispatch is not built (make install builds it)"
    before = kop.fast.stats()
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    y = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    g = torch.randn(12, dtype=torch.float64)
    f(x * 1, y * 1).backward(g)
    assert torch.equal(x.grad, g.view(3, 4)) and torch.equal(y.grad, g.view(3, 4))
    f(x, x).backward(g)
    assert torch.equal(x.grad, g.view(3, 4) * 3)
    x.grad = y.grad = None
    f(x, y).sum().backward()          # an expanded grad (stride 0) is handed on as well
    assert torch.equal(x.grad, torch.ones(3, 4, dtype=torch.float64))
    after = kop.fast.stats()
    assert after["handed_on"] - before["handed_on"] == 3
    assert after["reverse_sweep"] == before["reverse_sweep"]
    assert torch.autograd.gradcheck(f, (x.detach().requires_grad_(), y))


def test_no_hand_on_where_the_size_covers_part_or_one_input_is_computed():
    """n = numel - 5: the first n elements are the grad's, the rest 0 (the sweep runs); an
    input whose gradient is computed (y: -2 d out) makes the sweep run for both."""
    f = torchclad.function(COPY_KERNEL, "pass", inputs=["x", "y"],
                           outputs={"out": lambda x, y: (x.numel(),)},
                           sizes={"n": lambda x, y: x.numel() - 5})
    kop = ops.kernel_op(f)
    before = kop.fast.stats()
    x = torch.randn(20, dtype=torch.float64, requires_grad=True)
    y = torch.randn(20, dtype=torch.float64, requires_grad=True)
    g = torch.randn(20, dtype=torch.float64) + 3
    f(x, y).backward(g)
    want = torch.cat([g[:15], torch.zeros(5, dtype=torch.float64)])
    assert torch.equal(x.grad, want) and torch.equal(y.grad, want)
    after = kop.fast.stats()
    assert after["handed_on"] == before["handed_on"]
    assert after["assigning_sweep"] - before["assigning_sweep"] == 1
    src = "void sub2(double* out, const double* x, const double* y, int n) {\n" \
          "    for (int i = 0; i < n; i++) out[i] = x[i] - 2.0 * y[i];\n}\n"
    h = torchclad.function(src, "sub2", inputs=["x", "y"], outputs={"out": ("n",)},
                           input_shapes={"x": ("n",), "y": ("n",)})
    hop = ops.kernel_op(h)
    x.grad = y.grad = None
    h(x, y).backward(g)
    assert torch.equal(x.grad, g) and torch.equal(y.grad, -2 * g)
    assert hop.fast.stats()["handed_on"] == 0 and hop.fast.stats()["assigning_sweep"] == 1


def test_spent_seeds_start_later_input_adjoints():
    """A grad the autograd engine hands over alone is kept once the assigning sweep has read
    it, and becomes a later sweep's input adjoint as it is (holding that old grad): every
    element must be overwritten. Backward after backward against torch."""
    if builtin_ops.gelu_op.fast is None:
        pytest.skip("no C++ eager path for the built-in kernels here")
    torch.manual_seed(1)
    ours, ref = tnn.GELU(approximate="tanh"), torch.nn.GELU(approximate="tanh")
    before = builtin_ops.gelu_op.fast.stats()["assigning_sweep"]
    for k in range(4):
        x = torch.randn(3, 41, 50, dtype=torch.float64)
        w = torch.randn(3, 41, 50, dtype=torch.float64) * (k + 2)
        a, b = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        (ours(a) * w).sum().backward()      # mul's backward: a fresh grad, handed over alone
        (ref(b) * w).sum().backward()
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-12, atol=1e-12)
    assert builtin_ops.gelu_op.fast.stats()["assigning_sweep"] - before == 4
