"""Components, forward + backward: torchclad.nn vs torch.nn (eager) vs torch.compile.

At the GPT-2 small sizes of the Enzyme study: matmul (Linear) B4,T64,C768,OC768; causal
self-attention (c_attn, attention core, c_proj) B4,T64,C768,NH12; LayerNorm B4,T64,C768; GELU
(tanh) on B4,T64,3072; cross-entropy over 4*64 rows of V = 50304. One step = module(x) and
backward with a fixed grad_output (the loss itself for cross-entropy), the input requiring grad.

Every (component, implementation) runs in a process of its own (benchmarks/_worker.py), so its
peak RSS is its own; the processes of one component stay alive together and take turns, one
step each per round, so the per-round ratios compare steps run under the same machine load
(benchlib.run_interleaved). torch.compile's first call (compilation) is reported apart. Each
component at torch's default thread count (the headline: the machine's cores) and at one thread
(the per-core row).
A torchclad module that does not exist yet is a "n/a yet" row, not a failure.

Results: section ``components`` of benchmarks/results.json, table in results.md.

    python benchmarks/bench_components.py [--quick] [--cases gelu,layernorm] [--impls eager,torchclad]
                                          [--threads 0,1]
    pytest benchmarks/bench_components.py --benchmark-only -s
"""

from __future__ import annotations

import argparse
import sys

import benchlib as bl

SECTION = "components"
CASES = ("matmul", "attention", "layernorm", "gelu", "crossentropy")
IMPLS = ("eager", "torchclad", "compile")
THREADS = (0, 1)            # 0 = torch's default (the headline), 1 = per core


def label(case: str, threads: int) -> str:
    """The row label: component and thread count (`gelu 2thr`)."""
    return f"{case} {bl.thread_tag(threads)}"


def run_all(cases=CASES, impls=IMPLS, quick: bool = False, write: bool = True,
            thread_counts=THREADS) -> dict:
    # A component's step is 0.1-60 ms. The layernorm row at two threads, median torchclad /
    # eager: 0.84x-1.46x over four runs at 15 rounds / 2 s; 1.02x-1.08x over four at 40 / 10 s.
    warmup, rounds, min_s, max_s = (2, 5, 0.2, 30.0) if quick else (3, 40, 10.0, 60.0)
    machine = bl.machine_info()
    rows, labels = [], []
    for threads in thread_counts:
        for case in cases:
            res = bl.run_interleaved({impl: ["component", case, impl] for impl in impls},
                                     warmup={impl: warmup for impl in impls}, rounds=rounds,
                                     min_seconds=min_s, max_seconds=max_s, threads=threads,
                                     min_step_seconds=0.03)
            res = bl.summarize_rows(res, {"fwd_bwd": ("forward", "backward")})
            labels.append(label(case, threads))
            for impl in impls:
                row = {"case": labels[-1], "component": case,
                       "threads": threads or bl.default_threads(), **res[impl]}
                rows.append(row)
                print(f"  components: {labels[-1]:14s} {impl:10s} {_brief(row)}", flush=True)
    payload = {
        "machine": machine,
        "method": (f"one process per implementation, all alive together; {warmup} warm-up steps "
                   f"each, then >= {rounds} rounds (>= {min_s} s, <= {max_s} s) of one step per "
                   "implementation (a step of a fast case = the mean of K back-to-back steps, "
                   "K sized to ~30 ms), order rotating; at torch's default thread count (the "
                   "headline) and at one thread (per core); process CPU time with one thread, "
                   "else wall; ratio = median over rounds of the per-round ratio to eager"),
        "cases": labels, "impls": list(impls), "quick": quick, "rows": rows,
    }
    if write:
        order = [label(c, t) for t in THREADS for c in CASES]
        bl.update_section(SECTION, bl.merged(SECTION, payload, ("case", "impl"), order, "cases"))
    return payload


def _brief(row: dict) -> str:
    failed = bl.failure_text(row, 160)
    if failed:
        return failed
    vs = (row.get("vs_eager") or {}).get("fwd_bwd")
    return (f"fwd+bwd {bl.fmt_ms(row['times']['fwd_bwd']['min'])} ms"
            + (f" ({vs['median']:.2f}x eager)" if vs else "")
            + f", peak RSS {row.get('rss_peak_mb', 0):.0f} MB")


def test_components(benchmark):
    """pytest-benchmark entry point: one round of all cases; numbers in results.json."""
    import render

    bl.benchmark_once(benchmark, run_all, render.components_table)
    # a case that fails is a row of the table (with its reason), not a failed benchmark run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--threads", default=",".join(map(str, THREADS)),
                    help="thread counts, 0 = torch's default")
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args(argv)
    import render

    payload = run_all(a.cases.split(","), a.impls.split(","), a.quick, write=not a.no_write,
                      thread_counts=[int(t) for t in a.threads.split(",")])
    print(render.components_table(payload))
    return 0


if __name__ == "__main__":
    sys.exit(main())
