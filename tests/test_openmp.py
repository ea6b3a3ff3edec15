"""`#pragma omp parallel for` in kernels (reverse/omp.py, reverse/parallel.py).

The forward keeps the pragma wherever its loops are canonical, whatever the iterations record
(slots, or per-iteration records with an offset table); the reverse runs the iterations in
parallel when the engine proves their adjoint writes disjoint, with fixed-chunk partial sums
for adjoints every iteration adds into; otherwise it runs serially and says so
(ParallelWarning, file:line:col). Gradients match torch and are the same bits at 1, 2 and 3
threads. The corpus (tests/corpus/kernels/omp_*.cpp) checks the same shapes against finite
differences in all eight variants.
"""
from __future__ import annotations

import re
import textwrap
import warnings
from pathlib import Path

import pytest
import torch

from torchclad.engine import ParallelWarning, differentiate

ELEMENTWISE = textwrap.dedent("""
    #include <cmath>
    template <typename T>
    void act(T* out, const T* inp, int N) {
      #pragma omp parallel for
      for (int i = 0; i < N; i++) { T x = inp[i]; out[i] = x * std::tanh(x); }
    }""")

# rows share w and an optional bias: partial sums over fixed chunks of rows
ROWS = textwrap.dedent("""
    template <typename T>
    void rows(T* out, const T* inp, const T* w, const T* bias, int B, int C) {
      #pragma omp parallel for
      for (int b = 0; b < B; b++) {
        const T* x = inp + b * C;
        T m = 0;
        for (int i = 0; i < C; i++) m += x[i] * w[i];
        for (int i = 0; i < C; i++) out[b * C + i] = x[i] * m + (bias != nullptr ? bias[i] : T(0));
      }
    }""")

# every iteration adds into the adjoint of the scalar a
SCALE = textwrap.dedent("""
    template <typename T>
    void scale(T* out, const T* inp, T a, int N) {
      #pragma omp parallel for
      for (int i = 0; i < N; i++) out[i] = a * inp[i] * inp[i];
    }""")

# the body records a value per inner step, and rows differ in how many: per-iteration records
PROD = textwrap.dedent("""
    template <typename T>
    void prod(T* out, const T* inp, int B, int C) {
      #pragma omp parallel for
      for (int b = 0; b < B; b++) {
        T p = 1;
        for (int i = 0; i < C - b % 3; i++) p = p * inp[b * C + i];
        out[b] = p;
      }
    }""")

# llm.c's matmul_forward (a constant step of 4, weights shared), an attention-like
# collapse(2) over (b, h) and llm.c's attention shape, collapse(3) over (b, t, h) (only b is
# parallel in the reverse): the corpus's kernels (double)
KERNELS = Path(__file__).resolve().parent / "corpus" / "kernels"
STEP, COLLAPSE, COLLAPSE3 = ((KERNELS / f).read_text() for f in
                             ("omp_step.cpp", "omp_collapse.cpp", "omp_collapse3.cpp"))
# a dense layer over collapse(2) rows: its reverse split in two nests (opt/fission.py), d w and
# d b in parallel over the output rows
FISSION = (KERNELS / "fission_rows.cpp").read_text()
CORPUS_WRT = {"omp_step": "inp, w", "fission_rows": "x, w, b"}

# a gather by index: the reverse scatters at indices read from memory (serial, with a warning)
GATHER = textwrap.dedent("""
    template <typename T>
    void gather(T* out, const long* idx, const T* table, int N, int C) {
      #pragma omp parallel for
      for (int n = 0; n < N; n++)
        for (int i = 0; i < C; i++) out[n * C + i] = table[idx[n] * C + i] * table[idx[n] * C + i];
    }""")

# a branch on a parameter the kernel never writes (a null bias), inside a parallel loop: the
# reverse tests the pointer again instead of taping the branch taken per iteration
NULL_BIAS = textwrap.dedent("""
    template <typename T>
    void guarded(T* out, const T* inp, const T* bias, int B, int C) {
      #pragma omp parallel for
      for (int b = 0; b < B; b++) {
        for (int i = 0; i < C; i++) {
          T y = inp[b * C + i] * inp[b * C + i];
          if (bias != nullptr) y += bias[i] * inp[b * C + i];
          out[b * C + i] = y;
        }
      }
    }""")

TEMPLATES = ELEMENTWISE + ROWS + SCALE + PROD + GATHER + NULL_BIAS


CORPUS = ("omp_step", "omp_collapse", "omp_collapse3", "fission_rows")   # double only


def _sweep(code: str, name: str) -> str:
    return code[code.index(f"{name}_reverse_sweep"):]


def _forw(code: str, name: str) -> str:
    start = code.index(f"{name}_reverse_forw")
    return code[start:code.index(f"{name}_reverse_sweep")]


def _derive(src: str, name: str, wrt=None):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        d = differentiate(src, name, wrt, filename="omp.cpp")
    return d, [str(w.message) for w in caught if issubclass(w.category, ParallelWarning)]


def _exact_at_thread_counts(run, want) -> None:
    """run() (a gradient) at 1, 2 and 3 threads: equal to want, and the same bits each time."""
    got = []
    threads = torch.get_num_threads()
    try:
        for t in (1, 2, 3):
            torch.set_num_threads(t)
            got.append(run())
    finally:
        torch.set_num_threads(threads)
    torch.testing.assert_close(got[0], want, rtol=1e-12, atol=1e-12)
    assert all(torch.equal(got[0], o) for o in got[1:])


# ---------------------------------------------------------------------------- generated code
def test_elementwise_reverse_is_parallel():
    d, warned = _derive(ELEMENTWISE, "act")
    assert "#pragma omp parallel for\n" in _forw(d.code, "act")
    assert "#pragma omp parallel for\n" in _sweep(d.code, "act")
    assert not warned and not d.notes


def test_a_pragma_before_a_nest_on_one_line_is_the_outer_loops():
    """`for (r ...) for (i ...)` on the pragma's next line: the pragma is the outer loop's
    (as the compiler reads it), never the inner one's, whose iterations all add into s[r]."""
    src = ("void rowsum(double* s, const double* x, int m, int n) {\n"
           "    #pragma omp parallel for\n"
           "    for (int r = 0; r < m; r++) for (int i = 0; i < n; i++) s[r] += x[r * n + i] * x[r * n + i];\n"
           "}\n")
    d, _ = _derive(src, "rowsum", "x")
    for text in (_forw(d.code, "rowsum"), _sweep(d.code, "rowsum")):
        pragmas = re.findall(r"#pragma omp parallel for[^\n]*\n\s*for \((?:int|long) (\w+)", text)
        assert pragmas and all(v != "i" for v in pragmas), text


@pytest.mark.parametrize("src,name,wrt", [(ROWS, "rows", "inp, w, bias"),
                                          (SCALE, "scale", "inp, a"),
                                          (STEP, "omp_step", "inp, w")])
def test_shared_adjoints_get_partial_sums_not_reductions(src, name, wrt):
    d, warned = _derive(src, name, wrt)
    sweep = _sweep(d.code, name)
    assert "#pragma omp parallel for" in sweep and "torchclad::par_combine" in sweep
    assert "reduction(" not in d.code and "atomic" not in d.code
    assert "#pragma omp parallel for" in _forw(d.code, name)
    assert not warned


def test_partial_sums_are_sized_by_the_work_of_an_iteration():
    """par_chunks gets the innermost iterations of one iteration where the loop bounds are
    integer parameters (rows: 2 C); where a bound is computed inside the loop (prod:
    C - b % 3), or for a body without loops (scale: 1), it gets what it can know."""
    calls = {}
    for src, name, wrt in ((ROWS, "rows", "inp, w, bias"), (PROD, "prod", "inp"),
                           (SCALE, "scale", "inp, a")):
        d, _ = _derive(src, name, wrt)
        calls[name] = re.findall(r"torchclad::par_chunks\(([^;]*)\)", _sweep(d.code, name))
    assert calls["rows"] and all(c.count(",") == 2 and c.count("C > 0 ? C : 0") == 2
                                 for c in calls["rows"]), calls["rows"]
    assert all(c.count(",") == 1 for c in calls["prod"])
    assert calls["scale"] and all(c.endswith(", 1") for c in calls["scale"]), calls["scale"]


def test_par_chunks_keeps_partial_sums_small_against_the_work(tmp_path):
    """The runtime's chunk count: at most 16 and the trip count; at most 2^22 / elements, but
    2 where one copy fits in 2^22 values (llm.c's matmul_forward at OC = 3072: a d weight of
    768 x 3072); and with the work of an iteration known, 2 k elements (zeroing and adding the
    partial sums) within half of n * work -- the encoder of a small GPT-2 (16 rows of 64 x 128
    values, partial sums of 56 + 64 rows of 128) in 2 chunks instead of 16. A count either
    limit cut is a power of two (7 -> 4, 3 -> 2)."""
    import subprocess

    from torchclad.toolchain.compiler import compiler, runtime_include_dir

    prog = tmp_path / "chunks.cpp"
    prog.write_text(textwrap.dedent("""
        #include <cstdio>
        #include <torchclad/parallel.h>
        int main() {
          std::printf("%ld %ld %ld %ld %ld %ld %ld\\n", torchclad::par_chunks(0, 10),
                      torchclad::par_chunks(5, 10), torchclad::par_chunks(100, 10),
                      torchclad::par_chunks(100, 1L << 20),
                      torchclad::par_chunks(16, (56 + 64) * 128, 64 * 128),
                      torchclad::par_chunks(1024, 256, 128), torchclad::par_chunks(3, 100, 1));
          std::printf("%ld %ld %ld %ld\\n", torchclad::par_chunks(32, 3072 + 768L * 3072),
                      torchclad::par_chunks(32, 768 + 768L * 768),
                      torchclad::par_chunks(32, (1L << 22) + 1), torchclad::par_chunks(16, 1000, 750));
          return 0;
        }"""))
    exe = tmp_path / "chunks"
    subprocess.run([*compiler(), "-std=c++17", "-I", str(runtime_include_dir()), str(prog),
                    "-o", str(exe)], check=True, capture_output=True)
    got = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    assert got == ["0", "5", "16", "4", "2", "16", "1", "2", "4", "1", "2"]


def test_recording_forward_stays_parallel_with_per_iteration_records():
    d, warned = _derive(PROD, "prod", "inp")
    forw, sweep = _forw(d.code, "prod"), _sweep(d.code, "prod")
    assert "#pragma omp parallel for" in forw and ".record(" in forw and ".save(_tape)" in forw
    assert "#pragma omp parallel for" in sweep and ".replay(" in sweep
    assert not warned


def test_a_branch_on_an_unwritten_parameter_is_tested_again_not_taped():
    d, warned = _derive(NULL_BIAS, "guarded", "inp, bias")
    forw, sweep = _forw(d.code, "guarded"), _sweep(d.code, "guarded")
    assert "_tape" not in forw.split("{", 1)[1] and ".record(" not in forw
    assert "if (bias != nullptr)" in sweep and "pop<bool>" not in sweep
    assert "#pragma omp parallel for" in forw and "#pragma omp parallel for" in sweep
    assert not warned
    # a parameter the function writes: its branch is taped as before
    written = NULL_BIAS.replace("#pragma omp", "if (C > 4) C = 4;\n      #pragma omp")
    d, _ = _derive(written.replace("bias != nullptr", "C > 2"), "guarded", "inp, bias")
    assert "pop<bool>" in _sweep(d.code, "guarded")


def test_collapse_and_step():
    d, warned = _derive(COLLAPSE, "omp_collapse", "inp")
    assert "collapse(2)" in _forw(d.code, "omp_collapse")
    assert "collapse(2)" in _sweep(d.code, "omp_collapse")
    assert not warned
    d, warned = _derive(COLLAPSE3, "omp_collapse3", "inp")
    assert "collapse(3)" in _forw(d.code, "omp_collapse3")
    sweep = _sweep(d.code, "omp_collapse3")
    assert "#pragma omp parallel for" in sweep and "collapse(" not in sweep   # b only
    assert not warned
    d, warned = _derive(STEP, "omp_step", "inp, w")
    assert "r += UNROLL" in STEP and "r += 4" in _forw(d.code, "omp_step") and not warned


def test_reverse_of_rows_is_split_and_the_sums_run_over_o():
    # opt/fission.py: the d x nest keeps (n, t) outside (parallel, collapse(2), d x private);
    # the d w / d b nest runs o outside, in parallel over o (each o owns its row of d w: no
    # partial sums), (n, t) inside; the seed d y is reset in that last nest only
    d, warned = _derive(FISSION, "fission_rows", "x, w, b")
    # (behind a run-time test of what the proofs assume; else the nest as it was)
    sweep = _sweep(d.code, "fission_rows").split("} else {")[0]
    first, second = sweep.split("#pragma omp parallel for")[1:]
    assert first.startswith(" collapse(2)") and "_d_x[r * C + i] +=" in first
    assert "_d_w[" not in first and "_d_b[" not in first and "_d_y[r * O + o] = 0" not in first
    assert re.match(r"( if\(.*\))?\n\s*for \(int o = 0; o < O; \+\+o\) \{\n\s*for \(int n = 0;",
                    second)
    assert "_d_w[o * C + i] +=" in second and "_d_b[o] +=" in second and "_d_x[" not in second
    assert sweep.count("_d_y[r * O + o] = 0;") == 1 and "_d_y[r * O + o] = 0;" in second
    assert "par_combine" not in sweep and not warned
    # not split: the reverse reads d u after adding into it in the same iteration
    d, warned = _derive(FISSION, "fission_chain")
    sweep = _sweep(d.code, "fission_chain")
    assert sweep.count("for (int o") == 1 and "par_combine" in sweep and not warned


def test_scatter_reverse_is_serial_and_says_why():
    d, warned = _derive(GATHER, "gather", "table")
    assert "#pragma omp parallel for" in _forw(d.code, "gather")
    assert "#pragma omp" not in _sweep(d.code, "gather")
    assert len(warned) == 1 and warned == list(d.notes)
    msg = warned[0]
    assert msg.startswith("omp.cpp:5:") and "runs serially" in msg
    assert "_d_table" in msg and "idx[n] * C + i" in msg


GUARDED = textwrap.dedent("""
    // a row's values after its full blocks of 4, as one more block of 4 whose lanes past the
    // row's end the guard keeps from reading (attention_forward's sum of exps)
    void tail(double* out, const double* x, int N, int C) {
      #pragma omp parallel for
      for (int n = 0; n < N; n++) {
        const double* r = x + n * C;
        int nb = C / 4;
        int rest = C - nb * 4;
        double s = 0;
        for (int k = 0; k < nb; k++)
          for (int j = 0; j < 4; j++) s += r[k * 4 + j] * r[k * 4 + j];
        for (int j = 0; j < 4; j++) {
          double v = j < rest ? r[nb * 4 + j] : 0.0;
          s += v * v * v;
        }
        out[n] = s;
      }
    }
""")


def test_a_guard_on_a_counter_bounds_what_it_guards():
    """`if (j < rest)` in the reverse (the ?: of the forward) narrows j's range for the
    accesses inside it: index n * C + nb * 4 + j stays within row n, so the reverse is
    parallel. One past it (`j <= rest`) may reach the next row: serial, with the reason."""
    d, warned = _derive(GUARDED, "tail", "x")
    assert "if (j < rest)" in _sweep(d.code, "tail")
    assert "#pragma omp parallel for" in _sweep(d.code, "tail") and not warned
    d, warned = _derive(GUARDED.replace("j < rest ?", "j <= rest ?"), "tail", "x")
    assert "#pragma omp" not in _sweep(d.code, "tail")
    assert len(warned) == 1 and "runs serially" in warned[0] and "nb * 4 + j" in warned[0]


def test_guarded_tail_gradients_match_torch_at_any_thread_count():
    import torchclad

    g = torchclad.gradient(GUARDED, "tail", "x")
    N, C = 9, 11                                  # blocks of 4: two full, a tail of 3
    x = torch.linspace(-1.5, 2.0, N * C, dtype=torch.float64)
    seed = torch.linspace(0.5, 1.5, N, dtype=torch.float64)
    xr = x.view(N, C).clone().requires_grad_()
    ((xr[:, :8] ** 2).sum(1) + (xr[:, 8:] ** 3).sum(1)).mul(seed).sum().backward()
    _exact_at_thread_counts(
        lambda: g(torch.zeros(N, dtype=torch.float64), x, N, C, grad_outputs={"out": seed})[0],
        xr.grad.reshape(-1))


STRIDED = textwrap.dedent("""
    // every other channel of a row (the real parts of interleaved pairs), squared and scaled
    void evens(double* out, const double* x, int N, int C) {
      #pragma omp parallel for
      for (int n = 0; n < N; n++)
        for (int i = 0; i < C; i += 2) out[n * C + i] = 3.0 * x[n * C + i] * x[n * C + i];
    }
""")


def test_an_inner_loop_with_a_step_keeps_the_reverse_parallel():
    """The reverse of `i += 2` steps its counter down (`i -= 2`); that step is the loop's own,
    not a write that makes the counter unknown, so index n * C + i stays within row n and the
    reverse is parallel. A counter the body also moves stays unknown: serial, with the reason."""
    d, warned = _derive(STRIDED, "evens", "x")
    assert "i -= 2" in _sweep(d.code, "evens")
    assert "#pragma omp parallel for" in _sweep(d.code, "evens") and not warned
    moved = STRIDED.replace("out[n * C + i] = 3.0", "{ out[n * C + i] = 3.0").replace(
        "x[n * C + i];\n", "x[n * C + i]; i += x[n * C] > 9 ? 1 : 0; }\n", 1)
    d, warned = _derive(moved, "evens", "x")
    assert "#pragma omp" not in _sweep(d.code, "evens")
    assert len(warned) == 1 and "runs serially" in warned[0]


def test_strided_gradients_match_torch_at_any_thread_count():
    import torchclad

    g = torchclad.gradient(STRIDED, "evens", "x")
    N, C = 7, 9                                    # an odd row: its last channel is even
    x = torch.linspace(-1.5, 2.0, N * C, dtype=torch.float64)
    seed = torch.linspace(0.5, 1.5, N * C, dtype=torch.float64)
    want = torch.zeros(N, C, dtype=torch.float64)
    want[:, ::2] = 6.0 * x.view(N, C)[:, ::2] * seed.view(N, C)[:, ::2]
    _exact_at_thread_counts(
        lambda: g(torch.zeros(N * C, dtype=torch.float64), x, N, C, grad_outputs={"out": seed})[0],
        want.reshape(-1))


UNROLLED = textwrap.dedent("""
    // a row four channels at a time, as llm.c unrolls; the last C % 4 channels are left alone
    void quads(double* out, const double* x, int N, int C) {
      #pragma omp parallel for
      for (int n = 0; n < N; n++)
        for (int i = 0; i + 3 < C; i += 4) {
          const double* xi = x + n * C + i;
          out[n * C + i] = xi[0] * xi[3];
          out[n * C + i + 1] = xi[1] * xi[1];
          out[n * C + i + 2] = 2.0 * xi[2];
          out[n * C + i + 3] = xi[3];
        }
    }
""")


def test_an_unrolled_inner_loop_keeps_the_reverse_parallel():
    """`i + 3 < C; i += 4` is read as `i < C - 3`: its reverse counts down from the last
    multiple of 4 with no trip count taped, and stays parallel. With an unsigned C (C - 3 would
    wrap for C < 3) the bound is `C > 3 ? C - 3 : 0`, and the reverse, inside `if` that bound
    is positive, counts down from the last multiple of 4 below C - 3: parallel too. A counter
    that does not start at a literal >= 0 is left as it is (taped, serial, with the reason)."""
    d, warned = _derive(UNROLLED, "quads", "x")
    sweep = _sweep(d.code, "quads")
    assert "#pragma omp parallel for" in sweep and "i -= 4" in sweep and not warned
    assert "_tape." not in sweep
    d, warned = _derive(UNROLLED.replace("int C)", "unsigned C)"), "quads", "x")
    sweep = _sweep(d.code, "quads")
    assert "#pragma omp parallel for" in sweep and not warned and "_tape." not in sweep
    assert "if ((C > 3 ? C - 3 : 0) > 0)" in sweep and "i = 0 + (C - 3 - 0 - 1) / 4 * 4" in sweep
    d, warned = _derive(UNROLLED.replace("int C)", "unsigned C, int lo)")
                        .replace("int i = 0;", "int i = lo;"), "quads", "x")
    assert "#pragma omp" not in _sweep(d.code, "quads")
    assert len(warned) == 1 and "runs serially" in warned[0]


@pytest.mark.parametrize("C,ctype", [(3, "int"), (4, "int"), (11, "int"), (12, "int"),
                                     (0, "unsigned"), (2, "unsigned"), (3, "unsigned"),
                                     (4, "unsigned"), (7, "unsigned"), (12, "unsigned")])
def test_unrolled_gradients_are_exact_at_any_thread_count(C, ctype):
    """Against the closed form, the same bits at 1, 2 and 3 threads; an unsigned C below 4 has
    no full group of four (nothing written, a zero gradient)."""
    import torchclad

    g = torchclad.gradient(UNROLLED.replace("int C)", f"{ctype} C)"), "quads", "x")
    N = 5
    x = torch.linspace(-1.5, 2.0, N * C, dtype=torch.float64).view(N, C)
    seed = torch.linspace(0.5, 1.5, N * C, dtype=torch.float64).view(N, C)
    want = torch.zeros(N, C, dtype=torch.float64)
    for q in range(0, C - 3, 4):
        want[:, q] = seed[:, q] * x[:, q + 3]
        want[:, q + 1] = 2.0 * x[:, q + 1] * seed[:, q + 1]
        want[:, q + 2] = 2.0 * seed[:, q + 2]
        want[:, q + 3] = seed[:, q] * x[:, q] + seed[:, q + 3]
    _exact_at_thread_counts(
        lambda: g(torch.zeros(N * C, dtype=torch.float64), x.reshape(-1), N, C,
                  grad_outputs={"out": seed.reshape(-1)})[0],
        want.reshape(-1))


BLOCKED = textwrap.dedent("""
    #include <algorithm>
    // a row in blocks of 8 (the last one partial), one block an iteration, the block's end
    // written three ways
    void ends_local(double* out, const double* x, int N) {
      #pragma omp parallel for
      for (int b = 0; b < (N + 7) / 8; b++) {
        int e = b * 8 + 8 < N ? b * 8 + 8 : N;
        for (int i = b * 8; i < e; i++) out[i] = 3.0 * x[i] * x[i];
      }
    }
    void ends_min(double* out, const double* x, int N) {
      #pragma omp parallel for
      for (int b = 0; b < (N + 7) / 8; b++)
        for (int i = b * 8; i < std::min(b * 8 + 8, N); i++) out[i] = 3.0 * x[i] * x[i];
    }
    void ends_and(double* out, const double* x, int N) {
      #pragma omp parallel for
      for (int b = 0; b < (N + 7) / 8; b++)
        for (int i = b * 8; i < b * 8 + 8 && i < N; i++) out[i] = 3.0 * x[i] * x[i];
    }
""")


@pytest.mark.parametrize("name", ["ends_local", "ends_min", "ends_and"])
def test_a_blocked_loop_keeps_the_reverse_parallel(name):
    """`for (i = b * 8; i < end; i++)` with the block's end a `?:`, std::min or `&&` of the
    block's bound and N: the inner counter is read as b * 8 plus a counter from 0 to at most
    7 (the end is at most b * 8 + 8 on both sides of the ?:), so the blocks' elements are
    disjoint: a parallel reverse with no tape and no partial sums for d x. With the block
    reaching one element into the next (b * 8 + 9), or blocks of 8 that start 7 apart, two
    iterations share an element: serial, with the reason."""
    d, warned = _derive(BLOCKED, name, "x")
    sweep = _sweep(d.code, name)
    assert "#pragma omp parallel for" in sweep and not warned
    assert "_tape." not in sweep and "par_combine" not in sweep
    for bad in (BLOCKED.replace("b * 8 + 8", "b * 8 + 9"),
                BLOCKED.replace("int i = b * 8;", "int i = b * 7;")):
        d, warned = _derive(bad, name, "x")
        assert "#pragma omp" not in _sweep(d.code, name)
        assert len(warned) == 1 and "runs serially" in warned[0] and "never touch" in warned[0]


@pytest.mark.parametrize("name", ["ends_local", "ends_min", "ends_and"])
@pytest.mark.parametrize("N", [1, 8, 29])
def test_blocked_gradients_are_exact_at_any_thread_count(name, N):
    import torchclad

    g = torchclad.gradient(BLOCKED, name, "x")
    x = torch.linspace(-1.5, 2.0, N, dtype=torch.float64)
    seed = torch.linspace(0.5, 1.5, N, dtype=torch.float64)
    _exact_at_thread_counts(
        lambda: g(torch.zeros(N, dtype=torch.float64), x, N, grad_outputs={"out": seed})[0],
        6.0 * x * seed)


def test_a_shared_adjoint_whose_counter_range_follows_the_parallel_one_gets_partial_sums():
    """A triangular inner loop (`j < b`) reaches the parallel counter through its range only:
    the engine tries to show the iterations' elements disjoint, cannot (x[0] is read by every
    row), and gives d x partial sums, as for any shared adjoint."""
    src = """void tri(double* out, const double* x, int N) {
      #pragma omp parallel for
      for (int b = 0; b < N; b++)
        for (int j = 0; j < b; j++) out[b] += x[j] * x[j];
    }"""
    d, warned = _derive(src, "tri", "x")
    sweep = _sweep(d.code, "tri")
    assert "#pragma omp parallel for" in sweep and "par_combine" in sweep and not warned


# a step held by a named constant, as llm.c's matmul_forward unrolls by LOOP_UNROLL
NAMED_STEP = textwrap.dedent("""
    void named_step(double* out, const double* x, const double* w, int N, int C) {
      const int UNROLL = 4;
      #pragma omp parallel for
      for (int r = 0; r < N; r += UNROLL) {
        for (int u = r; u < r + UNROLL && u < N; u++) {
          double s = 0;
          for (int i = 0; i < C; i++) s += x[u * C + i] * w[i];
          out[u] = s * s;
        }
      }
    }""")


def test_a_step_in_a_named_constant_keeps_the_pragma():
    """`r += UNROLL` with `const int UNROLL = 4` is a constant step: the reverse runs the
    blocks in parallel (d w in partial sums), with no tape for the counter; a step the body
    could change (the local assigned after its declaration) is refused, with the reason."""
    d, warned = _derive(NAMED_STEP, "named_step", "x, w")
    sweep = _sweep(d.code, "named_step")
    assert not warned and "#pragma omp parallel for" in sweep and "par_combine" in sweep
    assert "_tape.pop<int>" not in sweep
    changed = NAMED_STEP.replace("const int UNROLL = 4;", "int UNROLL = 4; UNROLL += N % 2;")
    d, warned = _derive(changed, "named_step", "x, w")
    assert "#pragma omp" not in d.code
    assert len(warned) == 1 and "not canonical" in warned[0]


# the same step as a constant at namespace scope
GLOBAL_STEP = "const int UNROLL = 4;\n" + NAMED_STEP.replace("  const int UNROLL = 4;\n", "")


def test_a_step_in_a_namespace_scope_constant_keeps_the_pragma():
    """`r += UNROLL` with `const int UNROLL = 4;` at namespace scope: the function reads a
    local copy of the constant, declared first in its body, and the loop is canonical as with
    the local; a global that is not const could change between calls and is refused."""
    assert "const int UNROLL" not in GLOBAL_STEP.split("{", 1)[1]
    d, warned = _derive(GLOBAL_STEP, "named_step", "x, w")
    sweep = _sweep(d.code, "named_step")
    assert not warned and "#pragma omp parallel for" in sweep and "par_combine" in sweep
    assert sweep.split("{", 1)[1].lstrip().startswith("const int UNROLL = 4;"), sweep
    # a namespace-qualified type (TYPE_REF and NAMESPACE_REF before the initializer)
    sized = "#include <cstddef>\n" + GLOBAL_STEP.replace("const int UNROLL",
                                                         "constexpr std::size_t UNROLL")
    d, warned = _derive(sized, "named_step", "x, w")
    assert not warned and "#pragma omp parallel for" in _sweep(d.code, "named_step")
    d, warned = _derive(GLOBAL_STEP.replace("const int UNROLL", "int UNROLL"), "named_step",
                        "x, w")
    assert "#pragma omp" not in d.code
    assert len(warned) == 1 and "not canonical" in warned[0]


@pytest.mark.parametrize("source", [NAMED_STEP, GLOBAL_STEP], ids=["local", "global"])
@pytest.mark.parametrize("N", [1, 4, 11])
def test_named_step_gradients_are_exact_at_any_thread_count(N, source):
    import torchclad

    C = 5
    g = torchclad.gradient(source, "named_step", "x, w")
    gen = torch.Generator().manual_seed(N)
    x = torch.randn(N * C, dtype=torch.float64, generator=gen)
    w = torch.randn(C, dtype=torch.float64, generator=gen)
    seed = torch.linspace(0.5, 1.5, N, dtype=torch.float64)
    xr, wr = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    ((xr.view(N, C) @ wr) ** 2 * seed).sum().backward()
    for k, want in ((0, xr.grad), (1, wr.grad)):
        _exact_at_thread_counts(
            lambda: g(torch.zeros(N, dtype=torch.float64), x, w, N, C,
                      grad_outputs={"out": seed})[k],
            want)


# a running max per row (its derivative goes to the element taken, engine/lastwrite.py), rows
# of V values Vp apart, as llm.c's softmax reads its padded vocabulary
ROW_MAX = textwrap.dedent("""
    void row_max(double* out, const double* x, int N, int V, int Vp) {
      #pragma omp parallel for
      for (int n = 0; n < N; n++) {
        const double* r = x + n * Vp;
        double m = -1e300;
        for (int i = 0; i < V; i++) if (r[i] > m) m = r[i];
        double s = 0;
        for (int i = 0; i < V; i++) s += r[i] * r[i];
        out[n] = m * s;
      }
    }""")


def test_a_running_max_keeps_the_reverse_parallel_under_a_tested_condition():
    """The index of the element a row's max took is read as a value of its loop's counter,
    0 <= _at < V; the rows' elements are disjoint when a row fits in its stride, Vp - V >= 0,
    which the engine cannot know and tests before the loop (`if(...)`: serial otherwise)."""
    d, warned = _derive(ROW_MAX, "row_max", "x")
    sweep = _sweep(d.code, "row_max")
    pragma = next(line for line in sweep.splitlines() if "#pragma omp parallel for" in line)
    assert not warned and "par_combine" not in sweep
    assert "(long)Vp - (long)V >= 0" in pragma, pragma


@pytest.mark.parametrize("V,Vp", [(5, 5), (5, 8), (7, 4)])
def test_running_max_gradients_are_exact_at_any_thread_count(V, Vp):
    """Rows that fit their stride (the parallel reverse) and rows that overlap (V > Vp: the
    condition fails and the same loop runs serially), against torch."""
    import torchclad

    N = 6
    g = torchclad.gradient(ROW_MAX, "row_max", "x")
    n_x = (N - 1) * Vp + V
    x = torch.randn(n_x, dtype=torch.float64, generator=torch.Generator().manual_seed(V * Vp))
    seed = torch.linspace(0.5, 1.5, N, dtype=torch.float64)
    xr = x.clone().requires_grad_(True)
    rows = torch.stack([xr[n * Vp:n * Vp + V] for n in range(N)])
    (rows.max(dim=1).values * (rows * rows).sum(dim=1) * seed).sum().backward()
    _exact_at_thread_counts(
        lambda: g(torch.zeros(N, dtype=torch.float64), x, N, V, Vp,
                  grad_outputs={"out": seed})[0],
        xr.grad)


@pytest.mark.parametrize("src,reason", [
    ("""void f(double* y, const double* x, int n, int k) {
      #pragma omp parallel for
      for (int i = 0; i < n; i += k) y[i] = x[i] * x[i];
    }""", "not canonical"),
    ("""void f(double* y, const double* x, int n, int k) {
      #pragma omp for
      for (int i = 0; i < n; i++) y[i] = x[i] * x[i];
    }""", "omp for"),
    ("""void f(double* y, const double* x, int n, int k) {
      #pragma omp parallel for collapse(2)
      for (int i = 0; i < n; i++) {
        y[i] = x[i];
        for (int j = 0; j < k; j++) y[i] *= x[i];
      }
    }""", "perfectly nested"),
])
def test_a_pragma_the_engine_drops_is_a_warning(src, reason):
    d, warned = _derive(src, "f", "x")
    assert "#pragma omp" not in d.code
    assert len(warned) == 1 and warned[0].startswith("omp.cpp:3:") and reason in warned[0]


# ---------------------------------------------------------------------------- numbers
@pytest.fixture(scope="module")
def mod():
    """kernel name -> its extension (the templates in one, each corpus kernel in its own)."""
    from torchclad import toolchain as build
    from torchclad.engine import Engine
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ParallelWarning)
        engine = Engine(TEMPLATES, "omp.cpp")
        derivs = [engine.derive("act", "inp"), engine.derive("rows", "inp, w, bias"),
                  engine.derive("scale", "inp, a"), engine.derive("prod", "inp"),
                  engine.derive("gather", "table"), engine.derive("guarded", "inp, bias")]
        corpus = [Engine(src, f"{name}.cpp").derive(name, CORPUS_WRT.get(name, "inp"))
                  for src, name in ((STEP, "omp_step"), (COLLAPSE, "omp_collapse"),
                                    (COLLAPSE3, "omp_collapse3"), (FISSION, "fission_rows"))]
    shared = build.load(derivs, name="openmp_tests")
    mods = {d.name: shared for d in derivs}
    mods.update({d.name: build.load([d], name=f"openmp_{d.name}") for d in corpus})
    return mods


def _ptr(t):
    return 0 if t is None else t.data_ptr()


def _run(mod, name, sfx, args, outs, grads, scalars=(), split=False):
    """Seeded gradients of kernel `name`: args = primal arguments (tensors or ints / floats);
    outs = names of the output tensors among args; grads = wrt tensors; returns the adjoints."""
    adj = {k: torch.zeros_like(v) for k, v in grads.items()}
    sadj = {k: torch.zeros(1, dtype=torch.float64 if sfx == "f64" else torch.float32)
            for k in scalars}
    seeds = {k: (torch.arange(args[k].numel(), dtype=args[k].dtype).reshape(args[k].shape)
                 .sin() + 0.25).clone() for k in outs}
    prim = [(_ptr(v) if isinstance(v, torch.Tensor) or v is None else v) for v in args.values()]
    dargs = [_ptr(adj[k]) if k in adj else sadj[k].data_ptr() for k in list(grads) + list(scalars)]
    used = {k: seeds[k].clone() for k in outs}            # the sweep zeroes what it reads
    dargs += [used[k].data_ptr() for k in outs if k not in grads]
    if split:
        tape = mod.Tape()
        getattr(mod, f"{name}_reverse_forw_{sfx}")(*prim, tape)
        getattr(mod, f"{name}_reverse_sweep_{sfx}")(*prim, *dargs, tape)
        assert tape.empty()
    else:
        getattr(mod, f"{name}_pullback_{sfx}")(*prim, *dargs)
    return {**adj, **sadj}, seeds


def _cases(dtype):
    g = torch.Generator().manual_seed(7)
    r = lambda *s: torch.rand(*s, generator=g, dtype=dtype) - 0.5
    B, C, N = 37, 9, 1001
    Bp, Tp, Cp, Hp = 3, 5, 8, 2
    return {
        "act": (dict(out=torch.zeros(N, dtype=dtype), inp=r(N), N=N), ["out"], ["inp"], ()),
        "rows": (dict(out=torch.zeros(B * C, dtype=dtype), inp=r(B * C), w=r(C), bias=r(C), B=B,
                      C=C), ["out"], ["inp", "w", "bias"], ()),
        "scale": (dict(out=torch.zeros(N, dtype=dtype), inp=r(N), a=0.7, N=N), ["out"], ["inp"],
                  ("a",)),
        "prod": (dict(out=torch.zeros(B, dtype=dtype), inp=r(B * C) + 1.0, B=B, C=C), ["out"],
                 ["inp"], ()),
        "omp_step": (dict(out=torch.zeros(24 * 5, dtype=dtype), inp=r(24 * 7), w=r(5 * 7), N=24,
                          C=7, OC=5), ["out"], ["inp", "w"], ()),
        "omp_collapse": (dict(out=torch.zeros(Bp * Hp * Tp, dtype=dtype), inp=r(Bp * Tp * 2 * Cp),
                              B=Bp, T=Tp, C=Cp, H=Hp), ["out"], ["inp"], ()),
        "omp_collapse3": (dict(out=torch.zeros(Bp * Hp * Tp, dtype=dtype),
                               inp=r(Bp * Tp * 2 * Cp), B=Bp, T=Tp, C=Cp, H=Hp), ["out"], ["inp"],
                          ()),
        "fission_rows": (dict(y=torch.zeros(Bp * Tp * 7, dtype=dtype), x=r(Bp * Tp * Cp),
                              w=r(7 * Cp), b=r(7), N=Bp, T=Tp, C=Cp, O=7), ["y"],
                         ["x", "w", "b"], ()),
        "guarded": (dict(out=torch.zeros(B * C, dtype=dtype), inp=r(B * C), bias=r(C), B=B,
                         C=C), ["out"], ["inp", "bias"], ()),
        "gather": (dict(out=torch.zeros(40 * 3, dtype=dtype),
                        idx=torch.randint(0, 6, (40,), generator=g), table=r(6 * 3), N=40, C=3),
                   ["out"], ["table"], ()),
    }


def _reference(name, args, seeds):
    """The same gradients from torch autograd (float64)."""
    a = {k: (v.detach().double().requires_grad_() if isinstance(v, torch.Tensor) and
             v.is_floating_point() else v) for k, v in args.items()}
    if name == "act":
        y = a["inp"] * torch.tanh(a["inp"])
    elif name == "rows":
        x = a["inp"].view(a["B"], a["C"])
        y = (x * (x * a["w"]).sum(1, keepdim=True) + a["bias"]).reshape(-1)
    elif name == "prod":
        x = a["inp"].view(a["B"], a["C"])
        y = torch.stack([x[b, :a["C"] - b % 3].prod() for b in range(a["B"])])
    elif name == "omp_step":
        y = ((a["inp"].view(a["N"], a["C"]) @ a["w"].view(a["OC"], a["C"]).T) ** 2).reshape(-1)
    elif name in ("omp_collapse", "omp_collapse3"):
        B, T, C, H = a["B"], a["T"], a["C"], a["H"]
        x = a["inp"].view(B, T, 2, H, C // H)
        q, k = x[:, :, 0], x[:, :, 1]                           # (B, T, H, D)
        dots = torch.einsum("bthd,bshd->bhts", q, k)
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        f = torch.tanh(dots) if name == "omp_collapse" else dots * dots
        acc = (f * mask).sum(-1)                                # (B, H, T)
        y = (acc if name == "omp_collapse" else acc.permute(0, 2, 1)).reshape(-1)
    elif name == "guarded":
        x = a["inp"].view(a["B"], a["C"])
        y = (x * x + (a["bias"] * x if a["bias"] is not None else 0)).reshape(-1)
    elif name == "gather":
        rows = a["table"].view(-1, a["C"])[a["idx"]]
        y = (rows * rows).reshape(-1)
    elif name == "fission_rows":
        x = a["x"].view(a["N"] * a["T"], a["C"])
        y = (x @ a["w"].view(a["O"], a["C"]).T + a["b"]).reshape(-1)
    else:
        raise KeyError(name)
    y.backward(next(iter(seeds.values())).double())
    return a


@pytest.mark.parametrize("name", ["act", "rows", "prod", "gather", "guarded", "omp_step",
                                  "omp_collapse",
                                  "omp_collapse3", "fission_rows"])
@pytest.mark.parametrize("split", [False, True], ids=["pullback", "split"])
def test_gradients_match_torch_and_are_bit_identical_across_threads(mod, name, split):
    before = torch.get_num_threads()
    types_ = [(torch.float64, "f64")] + ([(torch.float32, "f32")] if name not in CORPUS else [])
    try:
        for dtype, sfx in types_:
            args, outs, wrt, scalars = _cases(dtype)[name]
            results = []
            for threads in (1, 2, 3):
                torch.set_num_threads(threads)      # torch and the extension share libgomp
                run = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in args.items()}
                grads, seeds = _run(mod[name], name, sfx, run, outs, {k: run[k] for k in wrt},
                                    scalars, split)
                results.append(grads)
            for other in results[1:]:
                for k in results[0]:
                    assert torch.equal(results[0][k], other[k]), f"{name} {sfx} d{k} differs"
            if dtype == torch.float64:
                ref = _reference(name, args, seeds)
                for k in wrt:
                    torch.testing.assert_close(results[0][k], ref[k].grad, rtol=1e-10, atol=1e-12)
    finally:
        torch.set_num_threads(before)


def test_scalar_adjoint_partials_bit_identical(mod):
    before = torch.get_num_threads()
    try:
        out = []
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            args, outs, wrt, scalars = _cases(torch.float32)["scale"]
            grads, seeds = _run(mod["scale"], "scale", "f32", args, outs,
                                {k: args[k] for k in wrt}, scalars, split=True)
            out.append(grads)
        assert all(torch.equal(out[0][k], o[k]) for o in out[1:] for k in out[0])
        x = args["inp"].double()
        torch.testing.assert_close(out[0]["a"].double(), (seeds["out"].double() * x * x).sum()
                                   .reshape(1), rtol=1e-5, atol=1e-6)
    finally:
        torch.set_num_threads(before)


def test_rows_without_bias(mod):
    """A null bias: its adjoint is null too, and the partial sums never touch it."""
    args, outs, wrt, _ = _cases(torch.float64)["rows"]
    args["bias"] = None
    adj = {k: torch.zeros_like(args[k]) for k in ("inp", "w")}
    seed = torch.randn(args["out"].numel(), dtype=torch.float64)
    d_out = seed.clone()                                     # the sweep zeroes it
    mod["rows"].rows_pullback_f64(args["out"].data_ptr(), args["inp"].data_ptr(),
                                  args["w"].data_ptr(), 0, args["B"], args["C"],
                                  adj["inp"].data_ptr(), adj["w"].data_ptr(), 0, d_out.data_ptr())
    args["bias"] = torch.zeros(args["C"], dtype=torch.float64)
    ref = _reference("rows", args, {"out": seed})
    torch.testing.assert_close(adj["w"], ref["w"].grad)
    torch.testing.assert_close(adj["inp"], ref["inp"].grad)


def test_guarded_without_bias(mod):
    """The untaped branch with a null bias: the reverse skips the bias's adjoint (null too)."""
    args, outs, wrt, _ = _cases(torch.float64)["guarded"]
    args["bias"] = None
    d_inp = torch.zeros_like(args["inp"])
    seed = torch.randn(args["out"].numel(), dtype=torch.float64)
    d_out = seed.clone()                                     # the sweep zeroes it
    tape = mod["guarded"].Tape()
    m = mod["guarded"]
    m.guarded_reverse_forw_f64(args["out"].data_ptr(), args["inp"].data_ptr(), 0, args["B"],
                               args["C"], tape)
    m.guarded_reverse_sweep_f64(args["out"].data_ptr(), args["inp"].data_ptr(), 0, args["B"],
                                args["C"], d_inp.data_ptr(), 0, d_out.data_ptr(), tape)
    ref = _reference("guarded", args, {"out": seed})
    torch.testing.assert_close(d_inp, ref["inp"].grad)
