"""llm.c's kernels as written: the engine's generated reverse sweeps vs llm.c's own backwards.

    python benchmarks/bench_llmc.py --llmc PATH/TO/llm.c [--quick] [--kernels gelu,softmax_ce]
                                    [--threads 1,2]
    TORCHCLAD_LLMC=PATH pytest benchmarks/bench_llmc.py --benchmark-only -s

PATH is a checkout of https://github.com/karpathy/llm.c; nothing of it is shipped or
downloaded: the forward kernels and their hand-written backwards are read from
``train_gpt2.c`` at run time (by libclang extents, unedited). Without a path the benchmark
says so and is skipped.

For each kernel the program is: the engine's translation unit for the forward kernel as
written (``torchclad.engine.differentiate``), llm.c's backward of it, and a small case
(below, our own code) driving both through ``benchmarks/reverse/harness.h``: the adjoints
must agree with llm.c's backward (relative 1e-5 of the largest, else the kernel is not
timed), then forward, llm.c backward, ``reverse_forw`` and ``reverse_sweep`` are timed,
interleaved round by round, built with the flags of the installed built-in kernels
(``benchlib.kernel_build_flags``): on one OpenMP thread by the process CPU clock (per core), and
at 2 threads by the wall clock (``--threads``), where the generated sweeps run the parallel
loops the engine kept from the forward's pragmas. llm.c's own backwards are serial except
``matmul_backward`` (each row records the ``#pragma omp`` count of the backward it is timed
against, ``hand_pragmas``), so at 2 threads a ratio below 1 is the parallel sweep against a
serial backward, as a user of llm.c's CPU code would get it. Headline: the ratio of minima
generated sweep / llm.c backward; targets: <= 1.3, and for softmax -> cross-entropy composed
(differentiated as one function calling both) <= 3 against llm.c's fused
``crossentropy_softmax_backward``.

Results: section ``llmc`` of ``benchmarks/results.json`` (with --write).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import benchlib as bl

SECTION = "llmc"
TARGETS = {"softmax_ce": 3.0}
DEFAULT_TARGET = 1.3
THREADS = (1, 2)            # one thread (per core, CPU clock), then two (wall clock)
ENV = "TORCHCLAD_LLMC"


@dataclass(frozen=True)
class LCase:
    name: str
    label: str
    forward: tuple          # llm.c functions differentiated (the first is the request)
    backward: tuple         # llm.c functions the hand half calls
    wrt: tuple
    case: str               # C++ body of the Case struct (our own)
    glue: str = ""          # our own C++ placed after the llm.c functions (composition)
    request: str = ""       # the function differentiated when not forward[0]
    defines: dict = field(default_factory=dict)
    tol: float = 1e-5       # adjoints agree to tol * max|llm.c's| (float32 sums over 50k terms: more)


# Every Case below: buffers, random inputs, seeds on the primary output only (the other
# outputs llm.c's backward does not take get a zero seed), the hand half and the generated
# half. `G` names the generated functions of the request.
CASES = (
    LCase("encoder", "encoder B4,T64,C768, V=50257", ("encoder_forward",),
          ("encoder_backward",), ("wte", "wpe"), r"""
    int B = BENCH_B, T = BENCH_T, C = BENCH_C, V = 50257;
    std::vector<int> inp;
    std::vector<float> wte, wpe, out, seed, g_wte, g_wpe, g_out, h_wte, h_wpe;
    Case() : inp(B * T), wte(size_t(V) * C), wpe(T * C), out(B * T * C), seed(B * T * C),
             g_wte(size_t(V) * C), g_wpe(T * C), g_out(B * T * C), h_wte(size_t(V) * C),
             h_wpe(T * C) {
        for (int i = 0; i < B * T; i++) inp[i] = (i * 7919) % V;
        bench::fill(wte, -1, 1, 1); bench::fill(wpe, -1, 1, 2); bench::fill(seed, -1, 1, 3);
    }
    void reset() { bench::zero(g_wte); bench::zero(g_wpe); bench::zero(h_wte); bench::zero(h_wpe);
                   g_out = seed; }
    void forward() { encoder_forward(out.data(), inp.data(), wte.data(), wpe.data(), B, T, C); }
    void hand_backward() { encoder_backward(h_wte.data(), h_wpe.data(), seed.data(), inp.data(), B, T, C); }
    void aug_forward(torchclad::Tape& t) { encoder_forward_reverse_forw(out.data(), inp.data(), wte.data(), wpe.data(), B, T, C, t); }
    void sweep(torchclad::Tape& t) { encoder_forward_reverse_sweep(out.data(), inp.data(), wte.data(), wpe.data(), B, T, C, g_wte.data(), g_wpe.data(), g_out.data(), t); }
    std::vector<bench::Grad> grads() { return {{"wte", g_wte.data(), h_wte.data(), g_wte.size()},
                                               {"wpe", g_wpe.data(), h_wpe.data(), g_wpe.size()}}; }
    std::string sizes_json() { return "{\"B\": " + std::to_string(B) + ", \"T\": " + std::to_string(T) + ", \"C\": " + std::to_string(C) + "}"; }
""", defines={"BENCH_B": 4, "BENCH_T": 64, "BENCH_C": 768}),
    LCase("layernorm", "layernorm B4,T64,C768", ("layernorm_forward",), ("layernorm_backward",),
          ("inp", "weight", "bias"), r"""
    int B = BENCH_B, T = BENCH_T, C = BENCH_C;
    std::vector<float> inp, w, b, out, mean, rstd, seed, g_inp, g_w, g_b, g_out, g_mean, g_rstd,
        h_inp, h_w, h_b;
    Case() : inp(B * T * C), w(C), b(C), out(B * T * C), mean(B * T), rstd(B * T), seed(B * T * C),
             g_inp(B * T * C), g_w(C), g_b(C), g_out(B * T * C), g_mean(B * T), g_rstd(B * T),
             h_inp(B * T * C), h_w(C), h_b(C) {
        bench::fill(inp, -2, 2, 1); bench::fill(w, 0.5, 1.5, 2); bench::fill(b, -1, 1, 3);
        bench::fill(seed, -1, 1, 4);
    }
    void reset() { bench::zero(g_inp); bench::zero(g_w); bench::zero(g_b); bench::zero(g_mean);
                   bench::zero(g_rstd); bench::zero(h_inp); bench::zero(h_w); bench::zero(h_b);
                   g_out = seed; }
    void forward() { layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), B, T, C); }
    void hand_backward() { layernorm_backward(h_inp.data(), h_w.data(), h_b.data(), seed.data(), inp.data(), w.data(), mean.data(), rstd.data(), B, T, C); }
    void aug_forward(torchclad::Tape& t) { layernorm_forward_reverse_forw(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), B, T, C, t); }
    void sweep(torchclad::Tape& t) { layernorm_forward_reverse_sweep(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), B, T, C, g_inp.data(), g_w.data(), g_b.data(), g_out.data(), g_mean.data(), g_rstd.data(), t); }
    std::vector<bench::Grad> grads() { return {{"inp", g_inp.data(), h_inp.data(), g_inp.size()},
        {"weight", g_w.data(), h_w.data(), g_w.size()}, {"bias", g_b.data(), h_b.data(), g_b.size()}}; }
    std::string sizes_json() { return "{\"B\": " + std::to_string(B) + ", \"T\": " + std::to_string(T) + ", \"C\": " + std::to_string(C) + "}"; }
""", defines={"BENCH_B": 4, "BENCH_T": 64, "BENCH_C": 768}),
)


def _matmul_case(name: str, fn: str, oc: int) -> LCase:
    # the tiled matmul_forward falls back to matmul_forward_naive: both are in the source
    fwd = (fn,) if fn == "matmul_forward_naive" else (fn, "matmul_forward_naive")
    return LCase(name, f"{fn} B4,T64,C768,OC={oc}", fwd, ("matmul_backward",),
                 ("inp", "weight", "bias"), r"""
    int B = BENCH_B, T = BENCH_T, C = BENCH_C, OC = BENCH_OC;
    std::vector<float> inp, w, b, out, seed, g_inp, g_w, g_b, g_out, h_inp, h_w, h_b;
    Case() : inp(B * T * C), w(size_t(OC) * C), b(OC), out(B * T * OC), seed(B * T * OC),
             g_inp(B * T * C), g_w(size_t(OC) * C), g_b(OC), g_out(B * T * OC), h_inp(B * T * C),
             h_w(size_t(OC) * C), h_b(OC) {
        bench::fill(inp, -1, 1, 1); bench::fill(w, -1, 1, 2); bench::fill(b, -1, 1, 3);
        bench::fill(seed, -1, 1, 4);
    }
    void reset() { bench::zero(g_inp); bench::zero(g_w); bench::zero(g_b); bench::zero(h_inp);
                   bench::zero(h_w); bench::zero(h_b); g_out = seed; }
    void forward() { FN(out.data(), inp.data(), w.data(), b.data(), B, T, C, OC); }
    void hand_backward() { matmul_backward(h_inp.data(), h_w.data(), h_b.data(), seed.data(), inp.data(), w.data(), B, T, C, OC); }
    void aug_forward(torchclad::Tape& t) { FN_reverse_forw(out.data(), inp.data(), w.data(), b.data(), B, T, C, OC, t); }
    void sweep(torchclad::Tape& t) { FN_reverse_sweep(out.data(), inp.data(), w.data(), b.data(), B, T, C, OC, g_inp.data(), g_w.data(), g_b.data(), g_out.data(), t); }
    std::vector<bench::Grad> grads() { return {{"inp", g_inp.data(), h_inp.data(), g_inp.size()},
        {"weight", g_w.data(), h_w.data(), g_w.size()}, {"bias", g_b.data(), h_b.data(), g_b.size()}}; }
    std::string sizes_json() { return "{\"B\": " + std::to_string(B) + ", \"T\": " + std::to_string(T) + ", \"C\": " + std::to_string(C) + ", \"OC\": " + std::to_string(OC) + "}"; }
""".replace("FN", fn), defines={"BENCH_B": 4, "BENCH_T": 64, "BENCH_C": 768, "BENCH_OC": oc})


CASES = CASES + (
    _matmul_case("matmul_naive", "matmul_forward_naive", 768),
    _matmul_case("matmul_naive_3072", "matmul_forward_naive", 3072),
    _matmul_case("matmul", "matmul_forward", 768),
    _matmul_case("matmul_3072", "matmul_forward", 3072),
    LCase("attention", "attention B4,T64,C768,NH12", ("attention_forward",),
          ("attention_backward",), ("inp",), r"""
    int B = BENCH_B, T = BENCH_T, C = BENCH_C, NH = BENCH_NH;
    std::vector<float> inp, out, preatt, att, seed, g_inp, g_out, g_pre, g_att, h_inp, h_pre, h_att;
    Case() : inp(B * T * 3 * C), out(B * T * C), preatt(B * NH * T * T), att(B * NH * T * T),
             seed(B * T * C), g_inp(B * T * 3 * C), g_out(B * T * C), g_pre(B * NH * T * T),
             g_att(B * NH * T * T), h_inp(B * T * 3 * C), h_pre(B * NH * T * T), h_att(B * NH * T * T) {
        bench::fill(inp, -1, 1, 1); bench::fill(seed, -1, 1, 2);
    }
    void reset() { bench::zero(g_inp); bench::zero(g_pre); bench::zero(g_att); bench::zero(h_inp);
                   bench::zero(h_pre); bench::zero(h_att); g_out = seed; }
    void forward() { attention_forward(out.data(), preatt.data(), att.data(), inp.data(), B, T, C, NH); }
    void hand_backward() { attention_backward(h_inp.data(), h_pre.data(), h_att.data(), seed.data(), inp.data(), att.data(), B, T, C, NH); }
    void aug_forward(torchclad::Tape& t) { attention_forward_reverse_forw(out.data(), preatt.data(), att.data(), inp.data(), B, T, C, NH, t); }
    void sweep(torchclad::Tape& t) { attention_forward_reverse_sweep(out.data(), preatt.data(), att.data(), inp.data(), B, T, C, NH, g_inp.data(), g_out.data(), g_pre.data(), g_att.data(), t); }
    std::vector<bench::Grad> grads() { return {{"inp", g_inp.data(), h_inp.data(), g_inp.size()}}; }
    std::string sizes_json() { return "{\"B\": " + std::to_string(B) + ", \"T\": " + std::to_string(T) + ", \"C\": " + std::to_string(C) + ", \"NH\": " + std::to_string(NH) + "}"; }
""", defines={"BENCH_B": 4, "BENCH_T": 64, "BENCH_C": 768, "BENCH_NH": 12}),
    LCase("gelu", "GELU N=4*64*3072", ("gelu_forward",), ("gelu_backward",), ("inp",), r"""
    int N = BENCH_N;
    std::vector<float> inp, out, seed, g_inp, g_out, h_inp;
    Case() : inp(N), out(N), seed(N), g_inp(N), g_out(N), h_inp(N) {
        bench::fill(inp, -4, 4, 1); bench::fill(seed, -1, 1, 2);
    }
    void reset() { bench::zero(g_inp); bench::zero(h_inp); g_out = seed; }
    void forward() { gelu_forward(out.data(), inp.data(), N); }
    void hand_backward() { gelu_backward(h_inp.data(), inp.data(), seed.data(), N); }
    void aug_forward(torchclad::Tape& t) { gelu_forward_reverse_forw(out.data(), inp.data(), N, t); }
    void sweep(torchclad::Tape& t) { gelu_forward_reverse_sweep(out.data(), inp.data(), N, g_inp.data(), g_out.data(), t); }
    std::vector<bench::Grad> grads() { return {{"inp", g_inp.data(), h_inp.data(), g_inp.size()}}; }
    std::string sizes_json() { return "{\"N\": " + std::to_string(N) + "}"; }
""", defines={"BENCH_N": 4 * 64 * 3072}),
    LCase("residual", "residual N=4*64*768", ("residual_forward",), ("residual_backward",),
          ("inp1", "inp2"), r"""
    int N = BENCH_N;
    std::vector<float> a, b, out, seed, g_a, g_b, g_out, h_a, h_b;
    Case() : a(N), b(N), out(N), seed(N), g_a(N), g_b(N), g_out(N), h_a(N), h_b(N) {
        bench::fill(a, -1, 1, 1); bench::fill(b, -1, 1, 2); bench::fill(seed, -1, 1, 3);
    }
    void reset() { bench::zero(g_a); bench::zero(g_b); bench::zero(h_a); bench::zero(h_b); g_out = seed; }
    void forward() { residual_forward(out.data(), a.data(), b.data(), N); }
    void hand_backward() { residual_backward(h_a.data(), h_b.data(), seed.data(), N); }
    void aug_forward(torchclad::Tape& t) { residual_forward_reverse_forw(out.data(), a.data(), b.data(), N, t); }
    void sweep(torchclad::Tape& t) { residual_forward_reverse_sweep(out.data(), a.data(), b.data(), N, g_a.data(), g_b.data(), g_out.data(), t); }
    std::vector<bench::Grad> grads() { return {{"inp1", g_a.data(), h_a.data(), g_a.size()},
                                               {"inp2", g_b.data(), h_b.data(), g_b.size()}}; }
    std::string sizes_json() { return "{\"N\": " + std::to_string(N) + "}"; }
""", defines={"BENCH_N": 4 * 64 * 768}),
    LCase("softmax_ce", "softmax -> cross-entropy B4,T64,V50257,Vp50304",
          ("softmax_forward", "crossentropy_forward"), ("crossentropy_softmax_backward",),
          ("logits",), r"""
    int B = BENCH_B, T = BENCH_T, V = 50257, Vp = 50304;
    std::vector<int> targets;
    std::vector<float> logits, probs, losses, seed, g_logits, g_probs, g_losses, h_logits;
    Case() : targets(B * T), logits(size_t(B) * T * Vp), probs(size_t(B) * T * Vp), losses(B * T),
             seed(B * T), g_logits(size_t(B) * T * Vp), g_probs(size_t(B) * T * Vp), g_losses(B * T),
             h_logits(size_t(B) * T * Vp) {
        for (int i = 0; i < B * T; i++) targets[i] = (i * 104729) % V;
        bench::fill(logits, -4, 4, 1); bench::fill(seed, 0.5, 1.5, 2);
    }
    void reset() { bench::zero(g_logits); bench::zero(g_probs); bench::zero(h_logits); g_losses = seed; }
    void forward() { softmax_ce(losses.data(), probs.data(), logits.data(), targets.data(), B, T, V, Vp); }
    void hand_backward() { crossentropy_softmax_backward(h_logits.data(), seed.data(), probs.data(), targets.data(), B, T, V, Vp); }
    void aug_forward(torchclad::Tape& t) { softmax_ce_reverse_forw(losses.data(), probs.data(), logits.data(), targets.data(), B, T, V, Vp, t); }
    void sweep(torchclad::Tape& t) { softmax_ce_reverse_sweep(losses.data(), probs.data(), logits.data(), targets.data(), B, T, V, Vp, g_logits.data(), g_losses.data(), g_probs.data(), t); }
    std::vector<bench::Grad> grads() { return {{"logits", g_logits.data(), h_logits.data(), g_logits.size()}}; }
    std::string sizes_json() { return "{\"B\": " + std::to_string(B) + ", \"T\": " + std::to_string(T) + ", \"V\": " + std::to_string(V) + ", \"Vp\": " + std::to_string(Vp) + "}"; }
""", glue=r"""
// the composition (ours): softmax, then the cross-entropy of its probabilities
void softmax_ce(float* losses, float* probs, float* logits, int* targets, int B, int T, int V,
                int Vp) {
    softmax_forward(probs, logits, B, T, V, Vp);
    crossentropy_forward(losses, probs, targets, B, T, Vp);
}
""", request="softmax_ce", defines={"BENCH_B": 4, "BENCH_T": 64}, tol=1e-4),
)


# ----------------------------------------------------------------------------- llm.c's source
def llmc_functions(llmc: Path) -> dict:
    """{name: text} of the function definitions of train_gpt2.c, as written."""
    import clang.cindex as ci

    path = llmc / "train_gpt2.c"
    text = path.read_bytes()
    tu = ci.Index.create().parse(str(path), args=["-x", "c++", "-std=c++17", f"-I{llmc}"])
    out = {}
    for c in tu.cursor.get_children():
        if c.kind == ci.CursorKind.FUNCTION_DECL and c.is_definition() and \
                c.location.file is not None and Path(c.location.file.name) == path:
            out[c.spelling] = text[c.extent.start.offset:c.extent.end.offset].decode()
    return out


def llmc_macros(llmc: Path) -> str:
    """The #defines of train_gpt2.c the kernels use (GELU_SCALING_FACTOR), as written."""
    text = (llmc / "train_gpt2.c").read_text()
    return "\n".join(m.group(0) for m in re.finditer(r"^#define GELU_SCALING_FACTOR .*$", text,
                                                     re.M))


PRELUDE = "#include <math.h>\n#include <stddef.h>\n"


def generate(case: LCase, fns: dict, macros: str, out_dir: Path) -> tuple[Path, float, dict]:
    """(the program's translation unit, the engine's seconds, what became of the forward's
    OpenMP pragmas: ``pragmas`` in llm.c's functions, ``parallel_sweeps`` -- parallel loops
    in the generated reverse sweeps --, and the engine's ``warnings`` about them)."""
    from torchclad.engine import ParallelWarning, differentiate

    missing = [f for f in case.forward + case.backward if f not in fns]
    if missing:
        raise RuntimeError(f"train_gpt2.c has no {', '.join(missing)}")
    src = PRELUDE + macros + "\n\n" + "\n\n".join(fns[f] for f in reversed(case.forward)) + \
        case.glue
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ParallelWarning)
        d = differentiate(src, case.request or case.forward[0], list(case.wrt),
                          filename="train_gpt2.c")
    seconds = time.perf_counter() - t0
    tu = d.translation_unit()
    sweeps = re.findall(r"\n\S[^\n]*_reverse_sweep\((?:.|\n)*?\n}", tu)
    omp = {"pragmas": sum(len(re.findall(r"#pragma omp parallel", fns[f]))
                          for f in case.forward),
           "parallel_sweeps": sum(len(re.findall(r"#pragma omp parallel", b)) for b in sweeps),
           "warnings": [str(w.message) for w in caught
                        if issubclass(w.category, ParallelWarning)]}
    omp["hand_pragmas"] = sum(len(re.findall(r"#pragma omp", fns[f])) for f in case.backward)
    path = out_dir / f"{case.name}_generated.cpp"
    path.write_text(tu + "\n// llm.c's backward, as written\n" +
                    "\n\n".join(fns[f] for f in case.backward) + "\n")
    return path, seconds, omp


def build(case: LCase, tu: Path, out_dir: Path) -> tuple[Path, float]:
    prog = out_dir / f"{case.name}_bench.cpp"
    prog.write_text("// written by benchmarks/bench_llmc.py\n"
                    f'#include "{tu}"\n#include "reverse/harness.h"\n'
                    "struct Case {" + case.case + "};\n"
                    "int main(int argc, char** argv) {\n    Case c;\n"
                    f'    return bench::main_for("{case.name}", c, argc, argv);\n}}\n')
    exe = out_dir / f"{case.name}_bench"
    return exe, bl.compile_kernel_program(prog, exe, case.defines, case.name)


def label(case: LCase, threads: int) -> str:
    """The row label: the case, and the thread count when more than one."""
    return case.label + (f" ({threads} threads)" if threads != 1 else "")


def run_case(case: LCase, fns: dict, macros: str, out_dir: Path, rounds: int,
             min_seconds: float, threads: int = 1) -> dict:
    import bench_reverse as br

    base = {"kernel": case.name, "label": label(case, threads),
            "function": case.request or case.forward[0], "threads": threads}
    try:
        tu, gen_s, omp = generate(case, fns, macros, out_dir)
        base["omp"] = omp
        exe, build_s = build(case, tu, out_dir)
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        proc = subprocess.run([str(exe), "--rounds", str(rounds), "--min-seconds", str(min_seconds),
                               "--tol", str(case.tol)],
                              capture_output=True, text=True, timeout=3600, env=env)
        if proc.returncode != 0:
            return {**base, "status": "error",
                    "reason": f"exit {proc.returncode}: {proc.stderr.strip()[-2000:]}"}
        row = br.summarize(br.RevCase(case.name, base["function"], case.label),
                           json.loads(proc.stdout), gen_s, build_s, threads)
        target = TARGETS.get(case.name, DEFAULT_TARGET)
        r = row["min_ratios"]["sweep_over_hand"]
        row.update(target=target, meets_target=None if r is None else r <= target, omp=omp)
        return row
    except Exception as e:  # a broken case is a row, not the end of the suite
        return {**base, "status": "error", "reason": f"{type(e).__name__}: {e}"[-2000:]}


def llmc_path(arg: str | None) -> Path | None:
    p = arg or os.environ.get(ENV)
    if not p:
        return None
    p = Path(p)
    return p if (p / "train_gpt2.c").is_file() else None


def run_all(llmc: Path, kernels=None, quick=False, keep=None, thread_counts=THREADS) -> list:
    rounds, min_seconds = (5, 0.2) if quick else (20, 1.0)
    fns, macros = llmc_functions(llmc), llmc_macros(llmc)
    cases = [c for c in CASES if kernels is None or c.name in kernels]
    with tempfile.TemporaryDirectory(prefix="torchclad_bench_llmc_") as tmp:
        out_dir = Path(keep) if keep else Path(tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        rows = []
        for threads in thread_counts:
            for c in cases:
                rows.append(run_case(c, fns, macros, out_dir, rounds, min_seconds, threads))
                print(f"  llmc: {row_line(rows[-1])}", flush=True)
        return rows


def _omp_cell(r: dict) -> str:
    omp = r.get("omp")
    if omp is None:
        return ""
    return (f"{omp['pragmas']} / {omp['parallel_sweeps']}, {len(omp['warnings'])}; "
            f"{omp.get('hand_pragmas', '?')}")


def row_line(r: dict) -> str:
    """One row of :func:`table`."""
    if r.get("status") != "ok":
        return f"| {r['label']} | {r['status']}: {r.get('reason', '')[:120]} | | | {_omp_cell(r)} | |"
    m = r["min_ratios"]["sweep_over_hand"]
    med = r["ratios"]["sweep_over_hand"]
    return (f"| {r['label']} | {m:.2f} (median {med['median']:.2f}) | "
            f"<= {r['target']} {'ok' if r['meets_target'] else 'MISSED'} | "
            f"{r['tape_bytes']} | {_omp_cell(r)} | {r['check']} |")


def table(rows: list) -> str:
    lines = ["| kernel | generated sweep / llm.c backward | target | tape bytes | OpenMP "
             "(forward pragmas / parallel loops in the sweeps, warnings; pragmas in llm.c's "
             "backward) | check |",
             "|---|---|---|---|---|---|"]
    lines += [row_line(r) for r in rows]
    warned = [(r["label"], w) for r in rows for w in (r.get("omp") or {}).get("warnings", [])]
    if warned:
        lines += ["", "OpenMP warnings:"] + [f"- {k}: {w}" for k, w in warned]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llmc", help=f"path to a checkout of karpathy/llm.c (or ${ENV})")
    ap.add_argument("--kernels", default="")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--keep", default="")
    ap.add_argument("--threads", default=",".join(map(str, THREADS)),
                    help="OpenMP thread counts (default 1,2)")
    ap.add_argument("--write", action="store_true", help="record in benchmarks/results.json")
    args = ap.parse_args(argv)
    llmc = llmc_path(args.llmc)
    if llmc is None:
        print(f"bench_llmc: skipped: no llm.c checkout (pass --llmc PATH or set {ENV} to a "
              "directory holding train_gpt2.c; nothing is downloaded)")
        return 0
    rows = run_all(llmc, [k for k in args.kernels.split(",") if k] or None, args.quick,
                   args.keep or None, [int(t) for t in args.threads.split(",") if t])
    print(table(rows))
    if args.write:
        bl.update_section(SECTION, {"machine": bl.machine_info(with_torch=False), "rows": rows})
    return 0


def test_llmc_kernels(benchmark=None):
    """pytest entry (``--benchmark-only``): skipped without an llm.c checkout."""
    import pytest

    llmc = llmc_path(None)
    if llmc is None:
        pytest.skip(f"no llm.c checkout: set {ENV} to a directory holding train_gpt2.c")
    rows = run_all(llmc, quick=True)
    print(table(rows))
    assert all(r.get("status") == "ok" for r in rows), [r.get("reason") for r in rows]


if __name__ == "__main__":
    sys.exit(main())
