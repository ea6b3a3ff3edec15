"""Unsupported C++ is rejected with file:line:col and the construct's name; never a silent
wrong or zero gradient."""
from __future__ import annotations

import re

import pytest

from torchclad.engine import DiffError, differentiate

CASES = [
    ("goto", "double f(double x) { if (x > 0) goto end; x = x * x; end: return x; }",
     "goto is not supported"),
    ("try", "double f(double x) { try { x = x * 2; } catch (...) {} return x; }",
     "exceptions"),
    ("lambda", "double f(double x) { auto g = [](double v) { return v * v; }; return g(x); }",
     "lambdas are not supported"),
    ("throw", "double f(double x) { if (x < 0) throw 1; return x * x; }",
     "exceptions (throw) are not supported"),
    ("pointer to pointer", "double f(double** x) { return x[0][0]; }",
     "pointers to pointers"),
    ("virtual call",
     "struct B { virtual double g(double v) const { return v; } };"
     " double f(double x) { B b; return b.g(x) * x; }",
     "call to member function 'g' is not supported"),
    ("missing rule", "double mystery(double); double f(double x) { return mystery(x) * x; }",
     "no definition or custom derivative for 'mystery'"),
    ("unknown math", "#include <cmath>\ndouble f(double x) { return std::tgamma(x); }",
     "no derivative for call to 'std::tgamma'"),
    ("static state", "double f(double x) { static double acc = 0; acc += x; return acc; }",
     "static local 'acc'"),
    ("reference member", "struct R { double& r; }; double f(double x) { R s{x}; return s.r * x; }",
     "has a pointer or reference member 'r'"),
    ("syntax", "double f(double x) { return x * ; }", "does not compile"),
    ("re-pointed pointer",
     "double f(double x) { double a = x, b = 2 * x; double* p = &a; p = &b; return *p; }",
     "points into several arrays"),
    ("checkpoint on a while loop",
     "double f(double x, int n) {\n#pragma torchclad checkpoint\n while (n-- > 0) x = x * x;"
     " return x; }", "must come right before a for loop"),
    ("checkpoint with break",
     "double f(double x, int n) {\n#pragma torchclad checkpoint\n"
     " for (int i = 0; i < n; i++) { if (x > 9) break; x = x * x; } return x; }",
     "needs a counting loop"),
    ("checkpoint not before a loop",
     "double f(double x) {\n#pragma torchclad checkpoint\n x = x * x; return x; }",
     "must come right before a for loop"),
    ("checkpoint bad clause",
     "double f(double x, int n) {\n#pragma torchclad checkpoint often(3)\n"
     " for (int i = 0; i < n; i++) x = x * x; return x; }", "is not understood"),
    ("checkpoint unknown name",
     "double f(double x, int n) {\n#pragma torchclad checkpoint every(m)\n"
     " for (int i = 0; i < n; i++) x = x * x; return x; }", "'m' is not a variable visible"),
    ("checkpoint state not inferred",
     "void f(double* y, int n, int s) {\n#pragma torchclad checkpoint\n"
     " for (int i = 0; i < s; i++) for (int j = 1; j < n; j++) y[j] = y[j - 1] * y[j]; }",
     "name them, e.g. '#pragma torchclad checkpoint state(y[0:n])'"),
    ("checkpoint section moves",
     "void f(double* y, int n, int s) {\n#pragma torchclad checkpoint state(y[0:n])\n"
     " for (int i = 0; i < s; i++) { for (int j = 0; j < n; j++) y[j] = y[j] * y[j]; n = n - 1; } }",
     "depends on 'n', which the loop changes"),
    ("wrt not a parameter", "double f(double x) { return x * x; }", "wrt names 'y'"),
    ("wrt an int", "double f(double x, int n) { return x * n; }", "cannot differentiate"),
    ("no such function", "double g(double x) { return x; }", "no function 'f'"),
]


@pytest.mark.parametrize("what,src,message", CASES, ids=[c[0] for c in CASES])
def test_rejected_with_location(what, src, message):
    wrt = {"wrt not a parameter": "y", "wrt an int": "n"}.get(what)
    with pytest.raises(DiffError) as info:
        differentiate(src, "f", wrt, filename="kernel.cpp")
    text = str(info.value)
    assert message in text, text
    if what not in ("no such function",):
        assert re.match(r"kernel\.cpp:\d+:\d+: ", text), text


def test_diff_error_is_a_value_error():
    assert issubclass(DiffError, ValueError)


def test_unused_unsupported_function_does_not_block_others():
    src = "double bad(double x) { goto e; e: return x; }\ndouble f(double x) { return x * x; }"
    assert "f_pullback" in differentiate(src, "f").code


def test_pointer_re_pointed_between_locals_is_diagnosed():
    """The corpus kernel that moves one pointer from a scalar local to an array element."""
    from pathlib import Path
    path = Path(__file__).parent / "corpus" / "kernels" / "address_of_local.cpp"
    with pytest.raises(DiffError, match=r"address_of_local\.cpp:\d+:\d+: pointer 'p' points "
                                        r"into several arrays \(acc, tmp\)"):
        differentiate(path.read_text(), "address_of_local", filename=path.name)
