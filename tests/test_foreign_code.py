"""C++ written for Clad and llm.c's kernels as written (issue #18): what the corpus cases
(tests/corpus/cases.py, every construct in all variants) do not check on their own.

- element-sensitive memory (engine/analysis/regions.py): softmax rows of V elements with a
  stride Vp record nothing per element when they are disjoint, and still give the right
  gradient when they overlap (V > Vp: the entry test fails and the writes record);
- `torchclad.gradient` with None for a pointer, and a reference output seeded through
  grad_outputs;
- refusals name the construct in C++ words (never a libclang cursor kind) with file:line:col.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import torchclad
from torchclad.engine import DiffError, differentiate

SOFTMAX_ROWS = r"""
#include <math.h>
// rows of V probabilities, `Vp` apart (llm.c's padded vocabulary): padding set to zero
void softmax_rows(float* probs, const float* logits, int R, int V, int Vp) {
    for (int r = 0; r < R; r++) {
        const float* x = logits + r * Vp;
        float* p = probs + r * Vp;
        float mx = -10000.0f;
        for (int i = 0; i < V; i++)
            if (x[i] > mx) mx = x[i];
        float sum = 0.0f;
        for (int i = 0; i < V; i++) {
            p[i] = expf(x[i] - mx);
            sum += p[i];
        }
        for (int i = 0; i < V; i++) p[i] /= sum;
        for (int i = V; i < Vp; i++) p[i] = 0.0f;
    }
}
"""


def _sweep(code: str, name: str) -> str:
    start = code.index(f"void {name}_reverse_forw")
    return code[start:code.index("\n}\n", start)]


def test_disjoint_rows_record_nothing_per_element():
    forw = _sweep(differentiate(SOFTMAX_ROWS, "softmax_rows", "logits").code, "softmax_rows")
    # one entry test; the two row writes and the padding record only when it fails, the
    # normalisation reads its result (no record of its own)
    assert re.search(r"bool _disjoint0 = .*-\(long\)V \+ \(long\)Vp >= 0", forw)
    lines = forw.splitlines()
    pushes = [k for k, line in enumerate(lines) if line.strip() == "_tape.push(p[i]);"]
    assert pushes and all(_only_when_the_test_fails(lines, k) for k in pushes), forw
    # opt/unswitch.py: the loops also come without any record, run when the test holds
    assert re.search(r"if \(_disjoint0\) \{\n *for \(int i = 0; i < V; \+\+i\) \{\n"
                     r" *p\[i\] = expf\(", forw), forw


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _only_when_the_test_fails(lines: list, k: int) -> bool:
    """Whether line k runs only when an entry test `_disjointN` failed: it is inside
    `if (!_disjointN) {`, or in the `else` of `if (_disjointN) {` (a loop unswitched on it)."""
    depth = _indent(lines[k])
    for j in range(k - 1, -1, -1):
        line = lines[j]
        if not line.strip() or _indent(line) >= depth:
            continue
        depth = _indent(line)
        if re.fullmatch(r"if \(!_disjoint\d+\) \{", line.strip()):
            return True
        if line.strip() == "} else {":
            head = next(lines[m] for m in range(j - 1, -1, -1) if _indent(lines[m]) == depth
                        and lines[m].strip().startswith("if ("))
            if re.fullmatch(r"if \(_disjoint\d+\) \{", head.strip()):
                return True
    return False


def _fd_check(V: int, Vp: int):
    g = torchclad.gradient(SOFTMAX_ROWS, "softmax_rows", "logits")
    R = 3
    n = (R - 1) * Vp + max(V, Vp)
    rng = np.random.default_rng(V * 100 + Vp)
    logits = torch.tensor(rng.uniform(-2, 2, n), dtype=torch.float32)
    seed = torch.tensor(rng.uniform(-1, 1, n), dtype=torch.float32)
    (grad,) = g(torch.zeros(n), logits, R, V, Vp, grad_outputs={"probs": seed})

    def f(x):
        probs = np.zeros(n)
        for r in range(R):            # the kernel, in float64, rows in order (they may overlap)
            xr = x[r * Vp:r * Vp + V].copy()
            e = np.exp(xr - max(xr.max(), -10000.0))
            probs[r * Vp:r * Vp + V] = e / e.sum()
            probs[r * Vp + V:r * Vp + Vp] = 0
        return probs

    x = logits.double().numpy()
    fd = np.zeros(n)
    for j in range(n):
        h = 1e-6
        xp, xm = x.copy(), x.copy()
        xp[j] += h
        xm[j] -= h
        fd[j] = ((f(xp) - f(xm)) * seed.double().numpy()).sum() / (2 * h)
    np.testing.assert_allclose(grad.double().numpy(), fd, rtol=2e-3, atol=2e-4)


@pytest.mark.parametrize("V,Vp", [(5, 7), (7, 7), (7, 4)], ids=["padded", "tight", "overlapping"])
def test_rows_gradient_when_disjoint_and_when_overlapping(V, Vp):
    # overlapping rows (V > Vp) write elements a later row reads: the entry test fails and
    # the writes record, so the gradient stays right
    _fd_check(V, Vp)


def test_none_pointer_is_nullptr():
    src = r"""
#include <cstddef>
double biased(const double* x, const double* bias, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i] * x[i] + (bias != NULL ? bias[i] : 0.0);
    return s;
}"""
    g = torchclad.gradient(src, "biased")
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    dx, dbias = g(x, None, 3)
    assert dbias is None
    torch.testing.assert_close(dx, 2 * x)
    dx, dbias = g(x, torch.ones(3, dtype=torch.float64), 3)
    torch.testing.assert_close(dbias, torch.ones(3, dtype=torch.float64))


def test_reference_output_is_seeded_by_grad_outputs():
    src = "void upd(double& y, double x) { y = y * x + x * x; }"
    g = torchclad.gradient(src, "upd")
    dy, dx = g(2.0, 3.0, grad_outputs={"y": 1.0})
    assert (dy, dx) == (3.0, 8.0)          # y_out = y x + x^2: d/dy = x, d/dx = y + 2x


@pytest.mark.parametrize("src,fn,words", [
    ("struct N { double* p; };\ndouble f(double x) { N n{&x}; return n.p[0]; }", "f",
     "pointer or reference member"),
    ("double f(double x) { const char* s = \"a\"; return x * s[0]; }", "f", "a string literal"),
    ("double g(double x) { return x; }\ndouble g(double x, double y) { return x * y; }\n"
     "double f(double x) { return g(x); }", "f", "overloads are not supported"),
    ("double f(double x) { double** p = nullptr; return x; }", "f", "pointers to pointers"),
    ("double f(double x, int n) { double* b = new double[n]; b[0] = x; double r = b[0];"
     " delete[] b; return r; }", "f", "size known only at run time"),
])
def test_refusals_name_the_construct(src, fn, words):
    with pytest.raises(DiffError) as e:
        differentiate(src, fn)
    msg = str(e.value)
    assert re.match(r"^[^:\s]+:\d+:\d+: ", msg), msg
    assert words in msg, msg
    assert not re.search(r"\b[A-Z]+(_[A-Z]+)+\b", msg), msg     # no cursor kind such as GNU_NULL_EXPR


def test_member_function_is_refused_by_the_bindings_with_a_reason():
    src = "struct S { double k = 2; double f(double x) const { return k * x; } };"
    with pytest.raises(Exception) as e:
        torchclad.gradient(src, "S::f")
    assert "member function" in str(e.value)


STRUCT_REFS = r"""
struct Pair { double a; double b; };
// a reference to a struct and to one of its fields, after an early return (Clad's
// EarlyReturns.C structRefAfterEarly): uses of r are uses of p, writes through rb write p.b
double struct_refs(double x, double y) {
    if (y == 0) return 1;
    Pair p;
    p.a = x * y;
    p.b = x + y;
    Pair& r = p;
    double& rb = p.b;
    rb = rb * x;
    return r.a * r.b;
}
"""


@pytest.mark.parametrize("x,y", [(2.0, 1.0), (-0.7, 1.3)])
def test_reference_to_struct_and_field(x, y):
    g = torchclad.gradient(STRUCT_REFS, "struct_refs")
    dx, dy = g(x, y)
    # f = x y (x + y) x = x^3 y + x^2 y^2
    assert dx == pytest.approx(3 * x * x * y + 2 * x * y * y, rel=1e-12)
    assert dy == pytest.approx(x ** 3 + 2 * x * x * y, rel=1e-12)
    assert g(x, 0.0) == (0.0, 0.0)


STRUCT_BY_REFERENCE = r"""
struct S { double a; double b; };
void scale(S& s) { s.a = 3 * s.a; s.b = 3 * s.b; }
// a struct a callee overwrites through a reference while its old value is still needed
// (Clad's RecordRestore.C): saved whole before the call, restored after the callee's sweep
double by_reference(double x) {
    S s;
    s.a = x;
    s.b = 2 * x;
    double t = 0;
    for (int i = 0; i < 2; i++) {
        scale(s);
        t += s.a * s.a + s.b;
    }
    return t;
}
"""


def test_struct_passed_by_reference_to_a_writing_callee():
    (dx,) = torchclad.gradient(STRUCT_BY_REFERENCE, "by_reference")(1.5)
    # t = 9x^2 + 6x + 81x^2 + 18x = 90x^2 + 24x
    assert dx == pytest.approx(180 * 1.5 + 24, rel=1e-12)


STRUCT_TEMPLATE = r"""
template <typename T>
struct Pair2 { T a; T b; long n; };
// a helper the gradient does not need, over an instantiation of the template: lowered
// with the rest of the unit (it crashed the frontend: the instantiation's fields were not
// among its declaration's children)
inline long count(const Pair2<float>& p) { return p.n; }
double pair_template(double x) {
    Pair2<double> p;
    p.a = x;
    p.b = x * x;
    p.n = 2;
    return p.a * p.b * p.n;
}
"""


def test_struct_template_instantiation():
    (dx,) = torchclad.gradient(STRUCT_TEMPLATE, "pair_template")(1.5)
    assert dx == pytest.approx(6 * 1.5 * 1.5, rel=1e-12)      # d/dx 2 x^3


def test_c_string_argument():
    g = torchclad.gradient("double f(double x, const char* s) { return s[0] == 'x' ? x * x : x; }",
                           "f", "x")
    assert g(3.0, "x") == (6.0,)
    assert g(3.0, "y") == (1.0,)
