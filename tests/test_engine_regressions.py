"""Engine bugs found while writing the built-in kernels (docs/ENGINE_REQUESTS.md), each kept as
a kernel with its exact gradient. All functions share one source, so they compile once."""
from __future__ import annotations

import re
import textwrap

import pytest
import torch

from torchclad import toolchain as build
from torchclad.engine import Engine

SRC = textwrap.dedent("""
    #include <cmath>
    // nn-1: a void template callee gets no return seed
    template <typename T>
    void sq_into(T* y, const T* x, int n) { for (int i = 0; i < n; i++) y[i] = x[i] * x[i]; }
    template <typename T>
    void outer(T* y, const T* x, int n) { sq_into(y, x, n); }
    // nn-2: a T-returning callee spelled with explicit template arguments, result unused
    template <typename T>
    T sq_into_sum(T* y, const T* x, int n) {
      T s = 0;
      for (int i = 0; i < n; i++) { y[i] = x[i] * x[i]; s += y[i]; }
      return s;
    }
    template <typename T>
    void outer2(T* y, const T* x, int n) { sq_into_sum<T>(y, x, n); }
    // nn-3: a functional cast of a type-dependent compound expression
    template <typename T>
    double cast_sum(const T* x) { T a = x[0]; return double(a + std::log(a)); }
    // gpt2-1: a T-returning template helper is typed T, not double
    template <typename T> static T first_sq(const T* y) { return y[0] * y[0]; }
    template <typename T> T ret_t(const T* y) { return first_sq(y); }
    // gpt2-2: (void)f(...) is a call, not nothing
    static void scale2(double* y, const double* x, int n) {
      for (int i = 0; i < n; i++) y[i] = 2 * x[i];
    }
    double void_cast(double* y, const double* x, int n) { (void)scale2(y, x, n); return y[0]; }
    // gpt2-4: a conditional pointer argument keeps its activity
    static void addto(double* y, const double* x, const double* b, int n) {
      for (int i = 0; i < n; i++) y[i] = x[i] + (b != nullptr ? b[i] : 0.0);
    }
    double cond_ptr(double* y, const double* x, const double* b, int n, int hb) {
      addto(y, x, hb ? b : nullptr, n);
      double s = 0;
      for (int i = 0; i < n; i++) s += y[i] * y[i];
      return s;
    }
    // gpt2-6: slices of one write-once arena written by calls in a loop
    static void sq(double* y, const double* x, int n) {
      for (int i = 0; i < n; i++) y[i] = x[i] * x[i];
    }
    double layers(double* TORCHCLAD_WRITE_ONCE acts, const double* x0, int L, int n) {
      for (int i = 0; i < n; i++) acts[i] = x0[i];
      for (int l = 0; l < L; l++) sq(acts + (l + 1) * n, acts + l * n, n);
      double s = 0;
      for (int i = 0; i < n; i++) s += acts[L * n + i];
      return s;
    }
    // nn-6: an inactive (null) argument of a template custom pullback gets a typed null
    template <typename T>
    void scaled(T* out, const T* a, const T* b, int n) {
      for (int i = 0; i < n; i++) out[i] = a[i] * (b ? b[i] : T(2));
    }
    namespace clad { namespace custom_derivatives {
    template <typename T>
    void scaled_pullback(T* out, const T* a, const T* b, int n, T* _d_out, T* _d_a, T* _d_b,
                         int* _d_n) {
      for (int i = 0; i < n; i++) {
        _d_a[i] += _d_out[i] * (b ? b[i] : T(2));
        if (b && _d_b) _d_b[i] += _d_out[i] * a[i];
        _d_out[i] = 0;
      }
    }
    }}
    template <typename T>
    void use_scaled(T* out, const T* a, int n) { scaled(out, a, (const T*)nullptr, n); }
    // nn-7: a parallel reverse reduces into a bias adjoint that may be null
    void rows_bias(double* out, const double* inp, const double* bias, int B, int C) {
      #pragma omp parallel for
      for (int b = 0; b < B; b++)
        for (int i = 0; i < C; i++) out[b * C + i] = inp[b * C + i] * (bias ? bias[i] : 1.0);
    }
    // perf-1: an adjoint element accumulated across a loop is kept in a local ...
    void wsum(double* out, const double* w, const double* v, int m, int n) {
      for (int i = 0; i < n; i++) out[i] = 0;
      for (int s = 0; s < m; s++)
        for (int i = 0; i < n; i++) out[i] += w[s] * v[s * n + i];
    }
    // ... but not in a callee that a call site hands one array twice (overlapping adjoints)
    static void scale_by_first(double* out, const double* a, const double* b, int n) {
      for (int i = 0; i < n; i++) out[i] = a[0] * b[i];
    }
    void first_times(double* out, const double* x, int n) { scale_by_first(out, x, x, n); }
""")

REQUESTS = [("outer", "x"), ("outer2", "x"), ("cast_sum", "x"), ("ret_t", "y"),
            ("void_cast", "x"), ("cond_ptr", "x, b"), ("layers", "x0"), ("use_scaled", "a"), ("rows_bias", "inp, bias"),
            ("wsum", "w, v"), ("first_times", "x")]


@pytest.fixture(scope="module")
def mod():
    engine = Engine(SRC, "regressions.cpp")
    derivs = {name: engine.derive(name, wrt) for name, wrt in REQUESTS}
    return derivs, build.load(list(derivs.values()), name="engine_regressions")


def _call(mod, name, scalar, *args):
    return getattr(mod, f"{name}_pullback_{scalar}")(*args)


@pytest.mark.parametrize("dtype,sfx", [(torch.float32, "f32"), (torch.float64, "f64")])
def test_void_and_value_template_callees(mod, dtype, sfx):
    _, m = mod
    x = torch.tensor([1.5, -2.0], dtype=dtype)
    for name in ("outer", "outer2"):
        y, dx, dy = torch.zeros(2, dtype=dtype), torch.zeros(2, dtype=dtype), \
            torch.ones(2, dtype=dtype)
        _call(m, name, sfx, y.data_ptr(), x.data_ptr(), 2, dx.data_ptr(), dy.data_ptr())
        torch.testing.assert_close(dx, 2 * x)
        torch.testing.assert_close(y, x * x)


@pytest.mark.parametrize("dtype,sfx", [(torch.float32, "f32"), (torch.float64, "f64")])
def test_cast_and_t_returning_helpers(mod, dtype, sfx):
    _, m = mod
    x = torch.tensor([1.5, 2.0], dtype=dtype)
    dx = torch.zeros(2, dtype=dtype)
    _call(m, "cast_sum", sfx, x.data_ptr(), 1.0, dx.data_ptr())
    torch.testing.assert_close(dx, torch.tensor([1 + 1 / 1.5, 0], dtype=dtype))
    dx.zero_()
    _call(m, "ret_t", sfx, x.data_ptr(), 1.0, dx.data_ptr())
    torch.testing.assert_close(dx, torch.tensor([3.0, 0], dtype=dtype))


def test_void_cast_call_is_differentiated(mod):
    _, m = mod
    d = torch.float64
    x, y = torch.tensor([1.0, 2.0], dtype=d), torch.zeros(2, dtype=d)
    dx, dy = torch.zeros(2, dtype=d), torch.zeros(2, dtype=d)
    _call(m, "void_cast", "f64", y.data_ptr(), x.data_ptr(), 2, 1.0, dx.data_ptr(), dy.data_ptr())
    torch.testing.assert_close(dx, torch.tensor([2.0, 0.0], dtype=d))


@pytest.mark.parametrize("hb", [1, 0])
def test_conditional_pointer_argument(mod, hb):
    _, m = mod
    d = torch.float64
    x, b, y = torch.tensor([1.0, 2.0], dtype=d), torch.tensor([3.0, 4.0], dtype=d), \
        torch.zeros(2, dtype=d)
    dx, db, dy = (torch.zeros(2, dtype=d) for _ in range(3))
    _call(m, "cond_ptr", "f64", y.data_ptr(), x.data_ptr(), b.data_ptr(), 2, hb, 1.0,
          dx.data_ptr(), db.data_ptr(), dy.data_ptr())
    want = 2 * (x + b) if hb else 2 * x
    torch.testing.assert_close(dx, want)
    torch.testing.assert_close(db, want if hb else torch.zeros(2, dtype=d))


def test_write_once_arena_is_not_taped(mod):
    derivs, m = mod
    assert "_tape.push" not in derivs["layers"].code     # nothing recorded for the arena
    # (the same arena written in place, without the promise, is taped)
    inline = ("double layers(double* acts, const double* x0, int L, int n) {\n"
              "  for (int i = 0; i < n; i++) acts[i] = x0[i];\n"
              "  for (int l = 0; l < L; l++)\n"
              "    for (int i = 0; i < n; i++)\n"
              "      acts[(l + 1) * n + i] = acts[l * n + i] * acts[l * n + i];\n"
              "  return acts[L * n];\n}\n")
    assert "_tape.push" in Engine(inline, "inline.cpp").derive("layers", "x0").code
    d = torch.float64
    x = torch.tensor([1.1, 0.7], dtype=d)
    acts, dacts, dx = torch.zeros(8, dtype=d), torch.zeros(8, dtype=d), torch.zeros(2, dtype=d)
    _call(m, "layers", "f64", acts.data_ptr(), x.data_ptr(), 3, 2, 1.0, dx.data_ptr(),
          dacts.data_ptr())
    torch.testing.assert_close(dx, 8 * x ** 7)


@pytest.mark.parametrize("dtype,sfx", [(torch.float32, "f32"), (torch.float64, "f64")])
def test_template_custom_pullback_with_null_argument(mod, dtype, sfx):
    _, m = mod
    a = torch.tensor([1.0, -3.0], dtype=dtype)
    out, da, dout = torch.zeros(2, dtype=dtype), torch.zeros(2, dtype=dtype), \
        torch.ones(2, dtype=dtype)
    _call(m, "use_scaled", sfx, out.data_ptr(), a.data_ptr(), 2, da.data_ptr(), dout.data_ptr())
    torch.testing.assert_close(out, 2 * a)
    torch.testing.assert_close(da, torch.full((2,), 2.0, dtype=dtype))


def test_parallel_reduction_with_absent_bias(mod):
    derivs, m = mod
    # since #15: fixed-chunk partial sums (the same bits at any thread count), combined only
    # into a non-null adjoint; no OpenMP reduction
    code = derivs["rows_bias"].code
    assert "torchclad::par_combine" in code and "reduction(" not in code
    d = torch.float64
    B, C = 6, 5
    inp, bias = torch.randn(B * C, dtype=d), torch.randn(C, dtype=d)
    out, dout = torch.zeros(B * C, dtype=d), torch.ones(B * C, dtype=d)
    dinp, dbias = torch.zeros(B * C, dtype=d), torch.zeros(C, dtype=d)
    _call(m, "rows_bias", "f64", out.data_ptr(), inp.data_ptr(), bias.data_ptr(), B, C,
          dinp.data_ptr(), dbias.data_ptr(), dout.data_ptr())
    torch.testing.assert_close(dbias, inp.view(B, C).sum(0))
    dinp.zero_()
    dout.fill_(1.0)
    _call(m, "rows_bias", "f64", out.data_ptr(), inp.data_ptr(), 0, B, C,   # no bias
          dinp.data_ptr(), 0, dout.data_ptr())
    torch.testing.assert_close(dinp, torch.ones(B * C, dtype=d))


def test_loop_invariant_adjoint_is_accumulated_in_a_local(mod):
    derivs, m = mod
    assert "_acc0 +=" in derivs["wsum"].code
    d = torch.float64
    M, N = 3, 4
    w, v = torch.randn(M, dtype=d), torch.randn(M * N, dtype=d)
    out, dout = torch.zeros(N, dtype=d), torch.randn(N, dtype=d)
    dw, dv, seed = torch.zeros(M, dtype=d), torch.zeros(M * N, dtype=d), dout.clone()
    _call(m, "wsum", "f64", out.data_ptr(), w.data_ptr(), v.data_ptr(), M, N, dw.data_ptr(),
          dv.data_ptr(), seed.data_ptr())
    torch.testing.assert_close(dw, v.view(M, N) @ dout)
    torch.testing.assert_close(dv.view(M, N), torch.outer(w, dout))


def test_no_accumulator_when_a_callee_gets_one_array_twice(mod):
    derivs, m = mod
    callee = [t for n, t in derivs["first_times"].functions if n.startswith("scale_by_first")]
    # a and b are both only read by the callee: their adjoints are only added into, in any
    # order, so overlapping them is harmless and the accumulator is allowed (generate.overlapping);
    # the gradient below is the check that it stays right
    assert callee and any("_acc" in t for t in callee)
    assert "_acc0 +=" in derivs["wsum"].code              # the accumulator's spelling elsewhere
    d = torch.float64
    x = torch.tensor([0.5, -1.5, 2.0], dtype=d)
    out, dout, dx = torch.zeros(3, dtype=d), torch.ones(3, dtype=d), torch.zeros(3, dtype=d)
    _call(m, "first_times", "f64", out.data_ptr(), x.data_ptr(), 3, dx.data_ptr(),
          dout.data_ptr())
    expected = torch.full((3,), 0.5, dtype=d)
    expected[0] = x.sum() + x[0]
    torch.testing.assert_close(dx, expected)


# ---- reverse loop order, fixed-lane reductions, stored results (opt/loop_order.py) -----------
# The gradients of these kernels are checked against finite differences by the corpus
# (tests/corpus/kernels/order_*.cpp, stored_result.cpp); here: which shape the sweep takes.

def _functions_of(name: str) -> dict:
    from pathlib import Path

    from torchclad.engine import differentiate

    path = Path(__file__).resolve().parent / "corpus" / "kernels" / f"{name}.cpp"
    return dict(differentiate(path.read_text(), name, None, filename=path.name).functions)


def _sweep_of(name: str) -> str:
    return _functions_of(name)[f"{name}_reverse_sweep"]


def test_order_dependent_reverse_loops_stay_backwards():
    rec = _sweep_of("order_recurrence")
    assert "for (int i = n; i-- > 1; )" in rec      # y[i] from y[i - 1]: the tape is LIFO
    res = _sweep_of("order_resets")
    assert res.count("i-- > 0") == 3                 # out[0] every iteration; reset + accumulate
    assert "for (int i = 0;" not in res              # into one adjoint; popped values
    assert "for (int i = 0;" in _sweep_of("order_lanes")    # how a forwards loop is spelled


def test_independent_reverse_loops_run_forwards_with_lane_sums():
    sw = _sweep_of("order_lanes")
    assert "i-- >" not in sw
    assert "i-- >" in _sweep_of("order_recurrence")          # how a backwards loop is spelled
    assert "_lane0[_j0] +=" in sw and "_lane0_1[_j0] +=" in sw    # d a and d b, in 16 lanes
    assert "*_d_a += _acc0;" in sw and "*_d_b += _acc1;" in sw


def test_register_tile_reverse_runs_the_contiguous_index_innermost():
    # opt/interchange.py: the reverse of a 4-row register tile, tile loop outside, k inside, the
    # weight's adjoint accumulated straight into _d_w (no serial _d_wk, no lanes over 4 rows)
    from pathlib import Path

    from torchclad.engine import differentiate

    sw = _sweep_of("tile_interchange")
    assert re.search(r"for \(int j = 0; j < TILE; \+\+j\) \{\s*for \(int k = 0; k < K; \+\+k\)", sw)
    assert "_d_w[n * K + k] += x[r * K + k] * _d_acc[j];" in sw
    assert "_d_wk" not in sw and "_lane" not in sw
    path = Path(__file__).resolve().parent / "corpus" / "kernels" / "tile_interchange.cpp"
    d = differentiate(path.read_text(), "tile_triangle", None, filename=path.name)
    tri = dict(d.functions)["tile_triangle_reverse_sweep"]
    assert "for (int k = 0; k < K; ++k) {\n        double wk = w[k];" in tri   # j <= k: kept
    assert "_d_w[k] += _d_wk;" in tri


def test_serial_reverse_nest_is_split_with_the_sums_interchanged():
    # opt/fission.py's pass over serial nests: d x in the rows' order, then d w and d b with o
    # outside the rows (behind a run-time test of what the proof assumes, else the nest as it
    # was); the seed d y reset in the nest of sums only
    split = _sweep_of_file("fission_rows", "fission_serial").split("} else {")[0]
    sums = re.search(r"for \(int o = O; o-- > 0; \) \{\s*(double _acc0 = double\(0\);\s*)?"
                     r"for \(int r = R; r-- > 0; \) \{", split)      # (d b summed in a local)
    assert sums and split.index("_d_x[r * C + i] +=") < sums.start()
    assert "_d_w[" not in split[:sums.start()] and "_d_y[r * O + o] = 0;" not in split[:sums.start()]
    assert "_d_w[o * C + i] +=" in split[sums.start():] and "_d_x[" not in split[sums.start():]
    assert split.count("_d_y[r * O + o] = 0;") == 1


def _sweep_of_file(file: str, name: str) -> str:
    from pathlib import Path

    from torchclad.engine import differentiate

    path = Path(__file__).resolve().parent / "corpus" / "kernels" / f"{file}.cpp"
    return dict(differentiate(path.read_text(), name, None, filename=path.name).functions)[
        f"{name}_reverse_sweep"]


def test_write_once_results_are_read_back():
    fns = _functions_of("stored_result")
    sw, forw = fns["stored_result_reverse_sweep"], fns["stored_result_reverse_forw"]
    assert "std::exp" not in sw and "std::tanh" not in sw
    assert "std::exp" in forw and "std::tanh" in forw
    assert "d_tanh(out[n + i])" in sw and "_r_d0 * out[i]" in sw
    assert "_tape.pop" not in sw                     # the local e is re-read from out
    assert "_tape.pop" in _sweep_of("order_recurrence")     # where a sweep does pop


LANE_DOTS = """
void lane_dots(double* out, const double* x, const double* y, int n, int m) {
    for (int t = 0; t < n; t++) {
        for (int s = 0; s <= t; s++) {
            double acc[16];
            for (int j = 0; j < 16; j++) acc[j] = 0;
            for (int kb = 0; kb < m; kb++) {
                for (int j = 0; j < 16; j++) acc[j] += x[(t * m + kb) * 16 + j] * y[(s * m + kb) * 16 + j];
            }
            double dot = 0;
            for (int j = 0; j < 16; j++) dot += acc[j];
            out[t * n + s] = dot;
        }
    }
}
"""


def test_dead_resets_of_local_adjoint_arrays_are_dropped():
    # the 16-lane dot products of the attention kernel before its products became GEMMs:
    # `_d_acc` is declared in the body of the s loop; zeroing it after its last use (the
    # engine's reset for the next iteration) stores into a dead array
    from torchclad.engine import differentiate

    d = differentiate(LANE_DOTS, "lane_dots", "x, y")
    sw = dict(d.functions)["lane_dots_reverse_sweep"]
    assert "double _d_acc[16] = {};" in sw
    resets = re.findall(r"^\s*(\w+)\[[^\]\n]+\] = 0;$", sw, re.M)   # adjoint-array resets
    assert "_d_out" in resets and "_d_acc" not in resets


@pytest.mark.parametrize("name,writes", [
    ("order_recurrence", True),      # restores y from the tape
    ("ckpt_inferred", True),         # restores the snapshot of y
    ("ckpt_moving_pointer", True),   # re-runs a segment through a pointer popped from the tape
    ("ptr_local_repointed", False),  # restores only a local array, through a pointer into it
    ("stored_result", False),        # write-once output, read back
    ("order_lanes", False),
])
def test_derivative_says_whether_the_sweep_writes_primal_memory(name, writes):
    # checked against the memory itself for every corpus case by corpus_harness (split runs)
    from pathlib import Path

    from torchclad.engine import differentiate

    path = Path(__file__).resolve().parent / "corpus" / "kernels" / f"{name}.cpp"
    d = differentiate(path.read_text(), name, None, filename=path.name)
    assert d.sweep_writes_primal is writes


def test_a_loop_the_pullback_leaves_empty_is_dropped():
    """The forward part of a pullback keeps a loop only for what it records: a sum of squares
    records nothing, so no empty `for` is left for the reader. A loop whose counter outlives
    it (read after the loop) stays."""
    from torchclad.engine import differentiate

    sumsq = """
        double f(const double* x, int n) {
          double s = 0.0;
          for (int i = 0; i < n; ++i) { double a = x[i]; s += a * a; }
          return s;
        }"""
    pull = dict(differentiate(textwrap.dedent(sumsq), "f", "x").functions)["f_pullback"]
    assert pull.count("for (") == 1 and not re.search(r"\)\s*\{\s*\}", pull)
    search = """
        double g(const double* x, int n) {
          int i = 0;
          for (; i + 1 < n && x[i] < 0.0; ++i) {}
          return x[i] * x[i];
        }"""
    pull = dict(differentiate(textwrap.dedent(search), "g", "x").functions)["g_pullback"]
    assert "x[i] < 0.0" in pull


def test_unsigned_stepped_reverse_loop_stops_at_its_first_value():
    """The reverse of `for (size_t i = lo; i < n; i += c)` counts down from the last value; an
    unsigned counter below lo wraps around instead of going negative, so `i >= lo` alone never
    ends the loop when lo < c (it ran on past the first element: a crash). The unsigned form
    also stops above the last value; a signed counter keeps the plain `i >= lo`. Gradients:
    tests/corpus/kernels/abp09_unsigned_step.cpp."""
    sw = _sweep_of("abp09_unsigned_step")
    assert re.search(r"for \(std::size_t i = (_t\d+); i >= 2 && i <= \1; i -= 3\)", sw), sw
    assert re.search(r"for \(unsigned int i = (_t\d+); i <= \1; i -= 4\)", sw), sw
    from torchclad.engine import differentiate

    src = """
        double h(const double* x, int n) {
          double s = 1.0;
          for (int i = 2; i < n; i += 3) s = s * x[i] + 1.0;
          return s;
        }"""
    signed = dict(differentiate(textwrap.dedent(src), "h", "x").functions)["h_reverse_sweep"]
    assert re.search(r"for \(int i = 2 \+ \(n - 2 - 1\) / 3 \* 3; i >= 2; i -= 3\)", signed), signed


def test_stepped_reverse_loop_over_a_typedef_counter_keeps_both_bounds():
    """A counter whose type is a typedef the engine cannot see through may be signed: from 0 it
    keeps `i >= 0` beside the wrap test (`i <= last` alone would run on to -4, -8, ...)."""
    import torchclad

    src = textwrap.dedent("""
        typedef int idx_t;
        double h(const double* x, idx_t n) {
          double s = 1.0;
          for (idx_t i = 0; i < n; i += 4) s = s * x[i] + 1.0;
          return s;
        }""")
    from torchclad.engine import differentiate

    sweep = dict(differentiate(src, "h", "x").functions)["h_reverse_sweep"]
    assert re.search(r"for \(idx_t i = (_t\d+); i >= 0 && i <= \1; i -= 4\)", sweep), sweep
    x = torch.linspace(0.3, 1.7, 9, dtype=torch.float64)
    dx = torchclad.gradient(src, "h", "x")(x, 9)
    dx = dx[0] if isinstance(dx, (tuple, list)) else dx
    want = torch.zeros(9, dtype=torch.float64)   # s = ((x0 + 1) x4 + 1) x8 + 1
    want[0], want[4], want[8] = x[4] * x[8], (x[0] + 1) * x[8], (x[0] + 1) * x[4] + 1
    torch.testing.assert_close(dx, want, rtol=1e-12, atol=1e-12)
