"""The sweep that only reads its seeds (engine/analysis/outputs.py, generate.read_only_sweep).

When the primal writes each element of its outputs at most once and never reads them, the
seed resets of the reverse sweep are dead. The engine then also emits the sweep without them
(kind "reverse_sweep_assign" with every input adjoint still added into: extent ""), and the
C++ backward takes it when a grad would otherwise be copied (the caller still holds it): the
grad goes in as it is and is never written.
"""
from __future__ import annotations

import re

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


def _without_seed_resets(sweep: str, seeds) -> str:
    lines = [ln for ln in sweep.splitlines()
             if not any(re.fullmatch(rf"\s*_d_{s}\[[^;]*\] = 0;", ln) for s in seeds)]
    return "\n".join(lines)


# A loop zeroing the row of an input adjoint that an iteration owns (reverse/rows.py).
_ZERO_ROW = re.compile(r"\n\s*for \(long (_t\d+) = 0; \1 < [^;]*; \+\+\1\) \{\n"
                       r"\s*_d_\w+\[[^;]*\] = 0;\n\s*\}")


def _numbered(text: str) -> str:
    """The generated temporaries `_tN` renumbered in order of appearance."""
    seen: dict = {}
    return re.sub(r"\b_t\d+\b", lambda m: seen.setdefault(m.group(0), f"_t{len(seen)}"), text)


@pytest.mark.parametrize("name,seeds,nonneg,extents", [
    ("layernorm_forward", ("out", "mean", "rstd"), ("N", "C"),
     (("inp", "N*C"), ("weight", ""), ("bias", ""))),
    ("softmax_forward", ("out",), ("N", "C"), (("inp", "N*C"),)),
    ("crossentropy_forward", ("losses",), (), (("logits", ""),)),
    ("embedding_forward", ("out",), ("C",), (("weight", ""),)),
])
def test_builtins_with_outputs_written_once_get_the_sweep_without_seed_resets(
        name, seeds, nonneg, extents):
    d = _derive(name)
    assert "reverse_sweep_assign" in d.kinds
    assert d.assign_extents == extents
    assert d.assign_nonneg == nonneg
    f = dict(d.functions)
    sweep, variant = f[name + "_reverse_sweep"], f[name + "_reverse_sweep_assign"]
    # the same sweep, statement for statement, but for the resets of the seeds, and for the
    # adjoints with a size (rows the iterations own, reverse/rows.py): the zeroing of each row
    # folded into the first pass over it, whose additions assign (reverse/first_pass.py)
    assert any(re.search(rf"_d_{s}\[[^;]*\] = 0;", sweep) for s in seeds)
    body = variant.split("{", 1)[1].rstrip()
    assert not _ZERO_ROW.search(body)
    for a in (a for a, n in extents if n):
        first = re.compile(rf"(_d_{a}\[[^;]*\]) = (?!0;)")
        assert first.search(body) and not first.search(sweep)
        body = first.sub(r"\1 += ", body)
    body = _numbered(body)
    assert body == _numbered(_without_seed_resets(sweep, seeds).split("{", 1)[1].rstrip())
    assert "#pragma omp parallel for" in body


@pytest.mark.parametrize("name", ["attention_forward"])
def test_a_kernel_reading_its_outputs_has_none(name):
    d = _derive(name)
    assert "reverse_sweep_assign" not in d.kinds and d.assign_extents == ()


ONCE = {
    "rows": "for (int r = 0; r < m; r++) for (int i = 0; i < n; i++) "
            "out[r * n + i] = x[r * n + i] * x[r * n + i];",
    "row_pointer": "for (int r = 0; r < m; r++) { double* o = out + r * n; "
                   "for (int i = 0; i < n; i++) o[i] = 2.0 * x[r * n + i]; }",
    "strided": "for (int i = 0; i < n; i++) out[i] = x[2 * i];",
    "two_halves": "for (int i = 0; i < n; i++) out[i] = x[i];\n"
                  "    for (int i = 0; i < n; i++) out[n + i] = 3.0 * x[i];",
    "one_element": "double s = 0; for (int i = 0; i < n; i++) s += x[i] * x[i]; out[0] = s;",
    # two branches of one if writing one element: in one iteration only one runs
    "branch": "for (int i = 0; i < n; i++) { if (x[i] > 0) out[i] = x[i]; else out[i] = 0; }",
    "nested_branch": "for (int i = 0; i < n; i++) { if (x[i] > 0) { if (x[i] > 1) out[i] = 1; "
                     "else out[i] = x[i]; } else out[i] = 0.5 * x[i]; }",
}

NOT_ONCE = {
    # an element written twice: the seed's reset makes the first write's reverse see 0
    "twice": "for (int i = 0; i < n; i++) out[i / 2] = x[i];",
    "two_loops": "for (int i = 0; i < n; i++) out[i] = x[i];\n"
                 "    for (int i = 0; i < n; i++) out[i] = 2.0 * x[i];",
    "rows_overlap": "for (int r = 0; r < m; r++) for (int i = 0; i <= n; i++) "
                    "out[r * n + i] = x[r * n + i];",
    # rows of n laid out every p: disjoint only when p >= n, which the proof does not assume
    "padded_rows": "for (int r = 0; r < m; r++) { double* o = out + r * p; "
                   "for (int i = 0; i < n; i++) o[i] = x[r * n + i]; }",
    # the output read back, or added into
    "reads_output": "for (int i = 0; i < n; i++) { out[i] = x[i]; out[i] = out[i] * 3.0; }",
    "adds": "for (int i = 0; i < n; i++) out[i] += x[i];",
    # written through a call, or a pointer that moves
    "call": "for (int i = 0; i < n; i++) put(out, i, x[i]);",
    "moving_pointer": "double* o = out; for (int i = 0; i < n; i++) { *o = x[i]; o = o + 1; }",
    # two branches writing one element in different iterations, or a branch and a later store
    "branch_each_iteration": "for (int i = 0; i < n; i++) { if (x[i] > 0) out[0] = x[i]; "
                             "else out[0] = 0; }",
    "branch_then_store": "for (int i = 0; i < n; i++) { if (x[i] > 0) out[i] = x[i]; "
                         "else out[i] = 0; out[i] = 2.0 * x[i]; }",
}

PUT = "inline void put(double* o, int i, double v) { o[i] = v; }\n"


def _src(body: str) -> str:
    return (PUT + "void f(double* out, const double* x, int n, int m, int p) {\n    "
            + body + "\n}\n")


@pytest.mark.parametrize("case", sorted(ONCE))
def test_outputs_written_once_get_it(case):
    d = ad.differentiate(_src(ONCE[case]), "f", "x")
    assert d.assign_extents == (("x", ""),), dict(d.functions)["f_reverse_sweep"]
    variant = dict(d.functions)["f_reverse_sweep_assign"]
    assert not re.search(r"_d_out\[[^;]*\] = 0;", variant)


@pytest.mark.parametrize("case", sorted(NOT_ONCE))
def test_no_such_sweep_where_a_seed_element_could_be_read_twice(case):
    d = ad.differentiate(_src(NOT_ONCE[case]), "f", "x")
    assert "reverse_sweep_assign" not in d.kinds, dict(d.functions).get("f_reverse_sweep_assign")


ROWS = r"""
#include <cmath>
void rows(double* out, double* mean, const double* x, int m, int n) {
    for (int r = 0; r < m; r++) {
        const double* xr = x + r * n;
        double s = 0;
        for (int i = 0; i < n; i++) s += xr[i];
        double mu = s / n;
        double* o = out + r * n;
        for (int i = 0; i < n; i++) o[i] = std::tanh(xr[i] - mu) * xr[i];
        mean[r] = mu;
    }
}
"""


def _rows_ref(x, g, gm):
    x = x.detach().clone().requires_grad_(True)
    mu = x.mean(dim=1, keepdim=True)
    out = torch.tanh(x - mu) * x
    torch.autograd.backward([out, mu.squeeze(1)], [g, gm])
    return x.grad


def test_user_kernel_takes_it_only_for_a_grad_held_elsewhere():
    """A grad the caller holds goes in uncopied and stays untouched; a grad handed over alone
    takes the accumulating sweep (it resets it in place). Both against torch."""
    f = torchclad.function(ROWS, "rows", inputs=["x"],
                           outputs={"out": lambda x: tuple(x.shape),
                                    "mean": lambda x: (x.shape[0],)},
                           sizes={"m": lambda x: x.shape[0], "n": lambda x: x.shape[1]})
    kop = ops.kernel_op(f)
    assert kop.fast is not None, "torchclad._C_dispatch is not built (make install builds it)"
    stats = kop.fast.stats
    for k in range(3):
        x = torch.randn(7, 45, dtype=torch.float64, requires_grad=True)
        g = torch.randn(7, 45, dtype=torch.float64) * (k + 1)
        gm = torch.randn(7, dtype=torch.float64)
        keep, keep_m = g.clone(), gm.clone()
        before = stats()["assigning_sweep"]
        out, mean = f(x)
        torch.autograd.backward([out, mean], [g, gm])
        assert stats()["assigning_sweep"] - before == 1
        assert torch.equal(g, keep) and torch.equal(gm, keep_m)
        torch.testing.assert_close(x.grad, _rows_ref(x, g, gm), rtol=1e-12, atol=1e-12)
        x.grad = None
        before = stats()["assigning_sweep"]
        out, mean = f(x)
        torch.autograd.backward([out * 1.0, mean * 1.0], [g, gm])   # fresh grads, alone
        assert stats()["assigning_sweep"] == before
        torch.testing.assert_close(x.grad, _rows_ref(x, g, gm), rtol=1e-12, atol=1e-12)
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: f(t), (x,))


LEAKY = r"""
template <typename T>
void leaky(T* out, const T* x, int n) {
    for (int i = 0; i < n; i++) {
        if (x[i] > 0) out[i] = x[i];
        else out[i] = T(0.01) * x[i];
    }
}
"""


def test_a_kernel_writing_its_output_in_two_branches_takes_it():
    """Leaky ReLU written as an if / else: each branch writes out[i], one per element."""
    f = torchclad.function(LEAKY, "leaky", inputs=["x"],
                           outputs={"out": lambda x: tuple(x.shape)},
                           sizes={"n": lambda x: x.numel()})
    kop = ops.kernel_op(f)
    assert kop.fast is not None, "torchclad._C_dispatch is not built (make install builds it)"
    stats = kop.fast.stats
    for dtype in (torch.float64, torch.float32):
        x = torch.randn(300, dtype=dtype, requires_grad=True)
        g = torch.randn(300, dtype=dtype)
        keep = g.clone()
        before = stats()["assigning_sweep"]
        f(x).backward(g)
        assert stats()["assigning_sweep"] - before == 1
        assert torch.equal(g, keep)
        xr = x.detach().clone().requires_grad_(True)
        torch.nn.functional.leaky_relu(xr, 0.01).backward(g)
        torch.testing.assert_close(x.grad, xr.grad)
    x = torch.randn(20, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: f(t), (x,))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_layernorm_with_the_grad_held_by_the_caller(dtype):
    if builtin_ops.layernorm_kernel_op(1e-5).fast is None:
        pytest.skip("no C++ eager path for the built-in kernels here")
    torch.manual_seed(0)
    tol = dict(rtol=1e-10, atol=1e-10) if dtype == torch.float64 else dict(rtol=RTOL, atol=ATOL)
    ours = tnn.LayerNorm(70).to(dtype)
    ref = torch.nn.LayerNorm(70).to(dtype)
    with torch.no_grad():
        for m in (ours, ref):
            m.weight.copy_(torch.linspace(0.5, 1.5, 70))
            m.bias.copy_(torch.linspace(-1, 1, 70))
    fast = builtin_ops.layernorm_kernel_op(1e-5).fast
    before = fast.stats()["assigning_sweep"]
    for k in range(3):
        x = torch.randn(4, 33, 70, dtype=dtype)
        g = torch.randn(4, 33, 70, dtype=dtype) * (k + 1)
        keep = g.clone()
        a, b = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        ours(a).backward(g)
        ref(b).backward(g)
        assert torch.equal(g, keep)
        torch.testing.assert_close(a.grad, b.grad, **tol)
        for p, q in ((ours.weight, ref.weight), (ours.bias, ref.bias)):
            torch.testing.assert_close(p.grad, q.grad, **tol)
    assert fast.stats()["assigning_sweep"] - before == 3
