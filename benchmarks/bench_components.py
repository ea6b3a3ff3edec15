"""Components, forward + backward: torchclad.nn vs torch.nn (eager) vs torch.compile.

At the GPT-2 small sizes of the Enzyme study: matmul (Linear) B4,T64,C768,OC768; causal
self-attention (c_attn, attention core, c_proj) B4,T64,C768,NH12; LayerNorm B4,T64,C768; GELU
(tanh) on B4,T64,3072; cross-entropy over 4*64 rows of V = 50304. One step = module(x) and
backward with a fixed grad_output (the loss itself for cross-entropy), the input requiring grad.

Every (component, implementation) runs in a fresh process (benchmarks/_worker.py): peak RSS is
its own, and torch.compile's first call (compilation) is reported apart from the steady state.
A torchclad module that does not exist yet is a "n/a yet" row, not a failure.

Results: section ``components`` of benchmarks/results.json, table in results.md.

    python benchmarks/bench_components.py [--quick] [--cases gelu,layernorm] [--impls eager,torchclad]
    pytest benchmarks/bench_components.py --benchmark-only -s
"""

from __future__ import annotations

import argparse
import sys

import benchlib as bl

SECTION = "components"
CASES = ("matmul", "attention", "layernorm", "gelu", "crossentropy")
IMPLS = ("eager", "torchclad", "compile")


def run_all(cases=CASES, impls=IMPLS, quick: bool = False, write: bool = True) -> dict:
    warmup, steps, min_s = (2, 5, 0.2) if quick else (2, 10, 0.5)
    machine = bl.machine_info()
    threads = bl.bench_threads()
    machine["bench_threads"] = threads
    rows = []
    for case in cases:
        for impl in impls:
            out = bl.run_worker(["component", case, impl, "--warmup", str(warmup),
                                 "--steps", str(steps), "--min-seconds", str(min_s),
                                 "--threads", str(threads)], timeout=900)
            out.setdefault("case", case)
            out.setdefault("impl", impl)
            out = bl.summarize_worker(out)
            rows.append(out)
            print(f"  components: {case:12s} {impl:10s} {_brief(out)}", flush=True)
    payload = {
        "machine": machine,
        "method": (f"fresh process per case; {warmup} warm-up steps then >= {steps} timed steps "
                   f"(and >= {min_s} s); {threads or 'default'} thread(s); per-step process CPU "
                   "time with one thread, else wall time; ratios of minima"),
        "cases": list(cases), "impls": list(impls), "quick": quick, "rows": rows,
    }
    if write:
        bl.update_section(SECTION, bl.merged(SECTION, payload, ("case", "impl"), CASES, "cases"))
    return payload


def _brief(row: dict) -> str:
    if row.get("status") != "ok":
        return f"{row.get('status')}: {(row.get('reason') or row.get('error') or '')[:160]}"
    return (f"fwd+bwd {bl.fmt_ms(row['times']['fwd_bwd']['min'])} ms, "
            f"peak RSS {row.get('rss_peak_mb', 0):.0f} MB")


def test_components(benchmark):
    """pytest-benchmark entry point: one round of all cases; numbers in results.json."""
    import render

    payload = benchmark.pedantic(run_all, rounds=1, iterations=1)
    print("\n" + render.components_table(payload))
    for r in payload["rows"]:
        benchmark.extra_info[f"{r['case']}/{r['impl']}"] = (
            r["times"]["fwd_bwd"]["min"] if r.get("status") == "ok" else r.get("status"))
    # a case that fails is a row of the table (with its reason), not a failed benchmark run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args(argv)
    import render

    payload = run_all(a.cases.split(","), a.impls.split(","), a.quick, write=not a.no_write)
    print(render.components_table(payload))
    return 0


if __name__ == "__main__":
    sys.exit(main())
