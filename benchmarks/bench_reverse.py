"""AD overhead: the engine's generated reverse sweep vs a hand-written backward, in C++.

For each llm.c-style kernel of ``csrc/kernels/`` (layernorm, GELU, softmax, attention,
cross-entropy) this builds ONE program from

* the engine's translation unit (``torchclad.engine.differentiate(...).translation_unit()``:
  the kernel, ``<f>_reverse_forw`` and ``<f>_reverse_sweep``),
* a hand-written float32 backward of the same kernel, ``benchmarks/oracles/<kernel>_backward.cpp``
  (benchmark oracle only, never imported by the package),
* ``benchmarks/reverse/<kernel>_main.cpp`` + ``reverse/harness.h`` (the timing loop),

compiled with the flags of the installed built-in kernels as they run on this CPU
(``benchlib.kernel_build_flags``: the package's ``-O3 -std=c++17 -fno-fast-math -fopenmp``, the
libmvec declarations, the alias-check limit and the CPU-specific flags of the build the loader
picks, e.g. AVX-512; no ``-march=native``). The program first checks the hand-written adjoints against the generated
ones (relative 1e-5; cross-entropy also against a float64 reference) and refuses to time an
oracle that disagrees; then it times, interleaved round by round: the forward kernel, the
hand-written backward (after that forward), the augmented forward ``reverse_forw`` (fresh tape)
and the generated ``reverse_sweep`` (consuming that tape). One OpenMP thread (the kernels'
``omp parallel for`` loops and their generated sweeps run serially, like the hand-written
backwards: the comparison is per core). Clock: the process's CPU time; headline ratios: ratio
of the minima; the median over rounds of the per-round ratio (p10-p90) is kept beside it.

Sizes: the Enzyme GPT-2 study's (layernorm B4,T64,C768; GELU 4*64*3072; attention B4,T64,C768,NH12;
softmax 4*12*64 rows of 64; cross-entropy B4,T64,V50304).

Results: section ``reverse_sweep`` of ``benchmarks/results.json`` and the table in
``benchmarks/results.md``. Ratios are min/min from the same run; the target is
generated/hand-written <= 1.3x.

    python benchmarks/bench_reverse.py [--quick] [--kernels layernorm,gelu] [--keep DIR]
    pytest benchmarks/bench_reverse.py --benchmark-only -s
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import benchlib as bl

SECTION = "reverse_sweep"
TARGET = 1.3  # generated / hand-written, the project's goal


@dataclass(frozen=True)
class RevCase:
    kernel: str           # benchmarks/reverse/<kernel>_main.cpp, benchmarks/oracles/<kernel>_backward.cpp
    function: str         # the registry entry (torchclad/builtin/registry.py) that is differentiated
    label: str
    defines: dict = field(default_factory=dict)


CASES: tuple[RevCase, ...] = (
    RevCase("layernorm", "layernorm_forward", "layernorm B4,T64,C768",
            {"BENCH_B": 4, "BENCH_T": 64, "BENCH_C": 768}),
    RevCase("gelu", "gelu_forward", "GELU (tanh) N=4*64*3072", {"BENCH_N": 4 * 64 * 3072}),
    # the variant the op's backward runs: it assigns d inp and only reads the seed
    RevCase("gelu_assign", "gelu_forward", "GELU (tanh) N=4*64*3072, assigning sweep",
            {"BENCH_N": 4 * 64 * 3072}),
    RevCase("softmax", "softmax_forward", "softmax 4*12*64 rows of 64",
            {"BENCH_ROWS": 4 * 12 * 64, "BENCH_C": 64}),
    RevCase("softmax_assign", "softmax_forward", "softmax 4*12*64 rows of 64, assigning sweep",
            {"BENCH_ROWS": 4 * 12 * 64, "BENCH_C": 64}),
    RevCase("attention", "attention_forward", "attention B4,T64,C768,NH12",
            {"BENCH_B": 4, "BENCH_T": 64, "BENCH_C": 768, "BENCH_NH": 12}),
    RevCase("crossentropy", "crossentropy_forward", "cross-entropy B4,T64,V50304",
            {"BENCH_B": 4, "BENCH_T": 64, "BENCH_V": 50304}),
)


def _spec(function: str):
    from torchclad.builtin.registry import KERNELS

    for s in KERNELS:
        if s.name == function:
            return s
    return None


def generate(case: RevCase, out_dir: Path) -> tuple[Path | None, float, str]:
    """Run the engine on the registry entry; write the TU. (path, seconds, why-not)."""
    spec = _spec(case.function)
    if spec is None:
        return None, 0.0, f"not available yet: {case.function} is not in torchclad/builtin/registry.py"
    from torchclad.engine import differentiate
    from torchclad.builtin.registry import unit_source

    t0 = time.perf_counter()
    d = differentiate(unit_source(spec), spec.name, None if spec.wrt is None else list(spec.wrt),
                      filename=f"csrc/kernels/{spec.file}")
    tu = d.translation_unit()
    seconds = time.perf_counter() - t0
    path = out_dir / f"{case.kernel}_generated.cpp"
    path.write_text(tu)
    return path, seconds, ""


def build(case: RevCase, tu: Path, out_dir: Path) -> tuple[Path, float]:
    prog = out_dir / f"{case.kernel}_bench.cpp"
    prog.write_text(
        "// written by benchmarks/bench_reverse.py\n"
        f'#include "{tu}"\n'
        f'#include "oracles/{case.kernel}_backward.cpp"\n'
        f'#include "reverse/{case.kernel}_main.cpp"\n')
    exe = out_dir / f"{case.kernel}_bench"
    spec = _spec(case.function)
    return exe, bl.compile_kernel_program(prog, exe, case.defines, case.kernel,
                                          spec.libraries if spec is not None else ())


def _paired(series: dict[str, list[float]], num: tuple[str, ...], den: tuple[str, ...]) -> dict | None:
    """Median (p10, p90) over rounds of sum(num) / sum(den), each round's calls taken together."""
    n = min(len(v) for v in series.values())
    vals = []
    for r in range(n):
        d = sum(series[k][r] for k in den)
        if d > 0:
            vals.append(sum(series[k][r] for k in num) / d)
    if not vals:
        return None
    st = bl.stats(vals)
    return {"median": st["median"], "p10": st["p10"], "p90": st["p90"], "n": st["n"]}


RATIOS = {  # name: (numerator calls, denominator calls)
    "sweep_over_hand": (("reverse_sweep",), ("hand_backward",)),
    "sweep_over_forward": (("reverse_sweep",), ("forward",)),
    "hand_over_forward": (("hand_backward",), ("forward",)),
    "reverse_forw_over_forward": (("reverse_forw",), ("forward",)),
    "fwd_bwd_generated_over_hand": (("reverse_forw", "reverse_sweep"), ("forward", "hand_backward")),
}


def summarize(case: RevCase, raw: dict, gen_s: float, build_s: float, threads: int = 1) -> dict:
    """Statistics and ratios. Clock: the process CPU time (programs run on one OpenMP thread, on
    a shared machine). Headline ratios (``min_ratios``, and ``meets_target``): ratios of minima,
    the uncontended cost of each call; ``ratios``: medians (p10, p90) of the per-round ratios
    (the four calls of a round run back to back, under the same load), a check on the first.
    The wall-clock numbers are kept too."""
    cpu = {k: bl.stats(v) for k, v in raw["cpu_times"].items()}
    wall = {k: bl.stats(v) for k, v in raw["times"].items()}
    if threads > 1:      # several threads: CPU time adds theirs up; the wall clock is the time
        cpu, raw = wall, {**raw, "cpu_times": raw["times"]}
    ratios = {k: _paired(raw["cpu_times"], a, b) for k, (a, b) in RATIOS.items()}

    def min_ratio(t, a, b):
        return sum(t[k]["min"] for k in a) / sum(t[k]["min"] for k in b)

    mins = {k: min_ratio(cpu, a, b) for k, (a, b) in RATIOS.items()}
    r = mins["sweep_over_hand"]
    return {
        "kernel": case.kernel, "label": _label(case, threads), "function": case.function,
        "threads": threads,
        "status": "ok", "sizes": raw["sizes"], "tape_bytes": raw["tape_bytes"],
        "omp_threads": raw.get("omp_threads"), "check": raw["check"], "tol": raw["tol"],
        "clock": "process_cpu" if threads == 1 else "wall",
        "times": cpu, "wall_times": wall,
        "ratios": ratios,
        "min_ratios": mins,
        "wall_min_ratios": {k: min_ratio(wall, a, b) for k, (a, b) in RATIOS.items()},
        "meets_target": None if r is None else r <= TARGET,
        "spread_sweep": bl.spread(cpu["reverse_sweep"]),
        "spread_hand": bl.spread(cpu["hand_backward"]),
        "generate_seconds": gen_s, "compile_seconds": build_s,
    }


def _label(case: RevCase, threads: int) -> str:
    return case.label + (f" ({threads} threads)" if threads != 1 else "")


def run_case(case: RevCase, out_dir: Path, rounds: int, min_seconds: float, threads: int = 1) -> dict:
    base = {"kernel": case.kernel, "label": _label(case, threads), "function": case.function,
            "threads": threads}
    try:
        tu, gen_s, why = generate(case, out_dir)
        if tu is None:
            return {**base, "status": "unavailable", "reason": why}
        exe, build_s = build(case, tu, out_dir)
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        proc = subprocess.run([str(exe), "--rounds", str(rounds), "--min-seconds", str(min_seconds)],
                              capture_output=True, text=True, timeout=1800, env=env)
        if proc.returncode != 0:
            return {**base, "status": "error",
                    "reason": f"exit {proc.returncode}: {proc.stderr.strip()[-2000:]}"}
        return summarize(case, json.loads(proc.stdout), gen_s, build_s, threads)
    except Exception as e:  # a broken case is a row, not the end of the suite
        return {**base, "status": "error", "reason": f"{type(e).__name__}: {e}"[-2000:]}


def run_all(kernels: list[str] | None = None, quick: bool = False, keep: Path | None = None,
            write: bool = True, thread_counts=(1, 2)) -> dict:
    rounds, min_seconds = (5, 0.2) if quick else (30, 1.5)
    cases = [c for c in CASES if kernels is None or c.kernel in kernels]
    machine = bl.machine_info(with_torch=False)
    with tempfile.TemporaryDirectory(prefix="torchclad_bench_reverse_") as tmp:
        out_dir = Path(keep) if keep else Path(tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        rows = [run_case(c, out_dir, rounds, min_seconds, t) for t in thread_counts
                for c in cases]
    payload = {
        "machine": machine,
        "cxxflags": bl.kernel_build_flags()[2],
        "method": ("one C++ program per kernel, flags of the installed kernels: "
                   + bl.kernel_build_flags()[2]
                   + f"; OMP_NUM_THREADS={','.join(map(str, thread_counts))} (the generated "
                   "sweeps' loops are parallel, the hand-written backwards serial, as llm.c's); "
                   f"{rounds}+ interleaved rounds (>= {min_seconds} s of "
                   "sweeps) after 2 warm-up rounds; fresh tape per round; per-call process CPU "
                   "time at one thread, wall time at more (both kept); min_ratios = ratios of "
                   "minima (headline), ratios = medians of per-round ratios"),
        "target_sweep_over_hand": TARGET,
        "quick": quick,
        "rows": rows,
    }
    if write:
        bl.update_section(SECTION, bl.merged(SECTION, payload, ("kernel", "threads")))
    return payload


def table(payload: dict) -> str:
    import render

    return render.reverse_table(payload)


def test_reverse_sweep(benchmark):
    """pytest-benchmark entry point: one round of the whole suite; numbers in results.json."""
    if not bl.have_cxx():
        import pytest

        pytest.skip("no C++ compiler")
    payload = benchmark.pedantic(run_all, rounds=1, iterations=1)
    print("\n" + table(payload))
    for row in payload["rows"]:
        benchmark.extra_info[row.get("label", row["kernel"])] = (
            row["min_ratios"]["sweep_over_hand"] if row["status"] == "ok" else row.get("reason"))
    broken = [r for r in payload["rows"] if r["status"] == "error"]
    assert not broken, "\n".join(f"{r['kernel']}: {r['reason']}" for r in broken)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="few rounds (a smoke run)")
    ap.add_argument("--kernels", help="comma-separated subset of: "
                    + ",".join(c.kernel for c in CASES))
    ap.add_argument("--keep", type=Path, help="build in (and keep) this directory")
    ap.add_argument("--no-write", action="store_true", help="do not update results.json")
    ap.add_argument("--threads", default="1,2", help="OpenMP thread counts (default 1,2)")
    args = ap.parse_args(argv)
    kernels = args.kernels.split(",") if args.kernels else None
    payload = run_all(kernels, args.quick, args.keep, write=not args.no_write,
                      thread_counts=[int(t) for t in args.threads.split(",")])
    print(table(payload))
    return 1 if any(r["status"] == "error" for r in payload["rows"]) else 0


if __name__ == "__main__":
    sys.exit(main())
