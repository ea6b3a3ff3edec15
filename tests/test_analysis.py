"""The engine's analyses have printers (`Engine.explain`) and their own golden tests, like
Enzyme's ActivityAnalysis tests: each expectation below is the printer's exact output."""
from __future__ import annotations

import textwrap

from torchclad.engine import Engine, Options


def explain(src: str, name: str, wrt=None, **opts) -> str:
    return Engine(textwrap.dedent(src), "k.cpp", Options(**opts)).explain(name, wrt)


def test_activity_skips_values_that_reach_no_output():
    # AD-BUG-PATTERNS 6: `a` and `b` are varied but useless, so they carry no adjoint
    out = explain("""
        #include <cmath>
        double f(double x, double A, double C) {
          double a = std::acos(-C / A);
          double b = a * x;
          return A * x * x + C;
        }""", "f")
    assert out.splitlines()[:4] == [
        "== activity f",
        "varied: A, C, a, b, x",
        "useful: A, C, x",
        "active: A, C, x",
    ]


def test_activity_integer_cast_cuts_the_derivative():
    out = explain("""
        double f(double x) { int n = x; double y = n * x; return y; }""", "f")
    assert "active: x, y" in out.splitlines()
    # n is an int: no adjoint; the reverse sweep recomputes it for y's derivative
    assert "save [-] recompute [n]" in out


def test_activity_respects_wrt():
    out = explain("""
        double f(double x, double y) { double t = x * y; double u = y * y; return t + u; }""",
                  "f", "x")
    assert "varied: t, x" in out
    assert "active: t, x" in out


def test_activity_through_pointer_alias():
    out = explain("""
        void f(const double* inp, double* out, int n) {
          for (int i = 0; i < n; i++) { const double* x = inp + i; out[i] = x[0] * 2.0; }
        }""", "f", "inp")
    assert "active: inp[], out[]" in out


def test_tbr_records_a_value_overwritten_while_needed():
    out = explain("""
        double f(double x) {
          double v = x;
          v = v * v;
          v = v * v;
          return v;
        }""", "f")
    assert out.split("(split)\n")[1].splitlines() == [
        "record     line 4: v = v * v;",
        "record     line 5: v = v * v;",
        "scope      line 2: function body: save [v] recompute [-]",
    ]


def test_tbr_records_nothing_for_linear_accumulation():
    out = explain("""
        double f(const double* x, int n) {
          double s = 0;
          for (int i = 0; i < n; i++) s += 3.0 * x[i];
          return s;
        }""", "f")
    assert out.split("(split)\n")[1].strip() == "(nothing to record)"


def test_tbr_recomputes_loop_locals_and_saves_row_statistics():
    out = explain("""
        #include <cmath>
        void ln(double* out, const double* inp, int N, int C) {
          for (int n = 0; n < N; n++) {
            const double* x = inp + n * C;
            double m = 0;
            for (int i = 0; i < C; i++) m += x[i];
            m = m / C;
            double v = 0;
            for (int i = 0; i < C; i++) v += (x[i] - m) * (x[i] - m);
            double rs = 1.0 / std::sqrt(v / C + 1e-5);
            for (int i = 0; i < C; i++) { double h = (x[i] - m) * rs; out[n * C + i] = h; }
          }
        }""", "ln", "inp")
    # h's own value is never needed (out = h and h = (x - m) * rs are linear in h)
    assert out.split("(split)\n")[1].splitlines() == [
        "scope      line 4: block: save [m, v] recompute [x, rs]",
    ]


def test_tbr_saves_an_array_before_a_call_overwrites_it():
    out = explain("""
        static void fill(const double* x, double* buf, double p) {
          for (int i = 0; i < 4; i++) buf[i] = x[i] * p;
        }
        static double sq(const double* buf) {
          double s = 0; for (int i = 0; i < 4; i++) s += buf[i] * buf[i]; return s;
        }
        double f(const double* x) {
          double buf[4];
          fill(x, buf, 2.0);
          double a = sq(buf);
          fill(x, buf, 3.0);
          return a + sq(buf);
        }""", "f")
    assert "record     line 12: fill(x, buf, 3.0);" in out


def test_analyses_off_records_every_write():
    src = """
        double f(const double* x, int n) {
          double s = 0;
          for (int i = 0; i < n; i++) s += 3.0 * x[i];
          return s;
        }"""
    assert "(nothing to record)" in explain(src, "f")
    off = explain(src, "f", analyses=False)
    assert "record     line 4: s += 3.0 * x[i];" in off
