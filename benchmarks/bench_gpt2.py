"""GPT-2 124M training step: torchclad modular, torchclad fused, PyTorch eager, torch.compile.

GPT-2 small (12 layers, 12 heads, 768 channels, vocabulary 50304, block 1024) at
(B, T) in {(1, 16), (2, 32), (4, 64)}. A step = forward with targets, loss.backward(),
AdamW.step(); forward, backward and the optimizer are timed apart, and the comparison is on
forward + backward (AdamW is the same code for every implementation).

* ``torchclad``        ``torchclad.nn.GPT2(GPT2Config())``: autograd chains the layers' generated sweeps
* ``torchclad_fused``  ``GPT2(GPT2Config(), fused=True)``: one generated sweep for the whole model
* ``eager``            a plain-PyTorch GPT-2 (benchmarks/reference_models.py), same weights
* ``compile``          ``torch.compile(<that model>, dynamic=True)``: one graph for the three
                       shapes, so the later processes reuse the inductor cache; the first
                       step (compilation included) is reported apart

Every implementation runs in a process of its own (peak RSS of its own); the four processes of
one (B, T) stay alive together and take turns, one step each per round, so the per-round ratios
compare steps run under the same machine load (benchlib.run_interleaved; ~11 GB at once -- with
less memory available they run one at a time, unpaired). All implementations get the same
weights (copied by parameter name), so their first losses must agree (checked). A model that is
missing or fails is a row with its reason.

The GEMM floor of a step (``gemm_floor``, stored per case as ``gemm_floor_ms``): the
forward, d-input and d-weight sgemm of each of the 49 linear layers (4 per block and the
lm_head), replayed with ``torch.mm`` into preallocated outputs at the benchmark's thread count,
minimum over repetitions. Every implementation here runs these GEMMs through MKL, so no
fwd+bwd can be faster than it; eager's time over it is the most any of them can gain.

Results: section ``gpt2`` of benchmarks/results.json, table in results.md.

    python benchmarks/bench_gpt2.py [--quick] [--sizes 1x16,4x64] [--impls eager,torchclad]
    python benchmarks/bench_gpt2.py --gemm-floor-only   # (re)measure the floor only
    pytest benchmarks/bench_gpt2.py --benchmark-only -s
"""

from __future__ import annotations

import argparse
import sys

import benchlib as bl

SECTION = "gpt2"
SIZES = ((1, 16), (2, 32), (4, 64))
IMPLS = ("eager", "torchclad", "torchclad_fused", "compile")


def run_all(sizes=SIZES, impls=IMPLS, quick: bool = False, write: bool = True) -> dict:
    rounds, max_s = (2, 10.0) if quick else (12, 60.0)
    machine = bl.machine_info()
    threads = bl.bench_threads()
    machine["bench_threads"] = threads
    rows = []
    for B, T in sizes:
        case = f"B{B},T{T}"
        res = bl.run_interleaved({impl: ["gpt2", impl, str(B), str(T)] for impl in impls},
                                 warmup={impl: 3 if impl == "compile" else 2 for impl in impls},
                                 rounds=rounds, min_seconds=0.0, max_seconds=max_s,
                                 threads=threads, setup_timeout=1500, mem_per_worker_gb=3.5)
        res = bl.summarize_rows(res, {"fwd_bwd": ("forward", "backward"),
                                      "step": ("forward", "backward", "optimizer")})
        losses = {i: r["first_loss"] for i, r in res.items() if r.get("status") == "ok"}
        for impl in impls:
            row = {"case": case, "B": B, "T": T, **res[impl]}
            if impl in losses and "eager" in losses:  # same weights and tokens: same loss
                row["loss_diff_vs_eager"] = abs(losses[impl] - losses["eager"])
            rows.append(row)
            print(f"  gpt2: {case} {impl:16s} {_brief(row)}", flush=True)
    payload = {
        "machine": machine,
        "method": ("one process per implementation, all alive together (one at a time if memory "
                   "is short); 2 warm-up steps (3 for compile), then >= 2 and up to "
                   f"{rounds} rounds (stopping after {max_s:.0f} s) of one step per "
                   f"implementation, order rotating; {threads or 'default'} thread(s); process "
                   "CPU time with one thread, else wall; ratio = median over rounds of the "
                   "per-round forward+backward ratio to eager; AdamW timed apart"),
        "cases": [f"B{B},T{T}" for B, T in sizes], "impls": list(impls), "quick": quick,
        "rows": rows,
        "gemm_floor": _floors(sizes, threads, 2 if quick else 7),
    }
    if write:
        sec = bl.merged(SECTION, payload, ("case", "impl"), [f"B{B},T{T}" for B, T in SIZES],
                        "cases")
        old = bl.load_results().get("sections", {}).get(SECTION) or {}
        sec["gemm_floor"] = {**old.get("gemm_floor", {}), **payload["gemm_floor"]}
        bl.update_section(SECTION, sec)
    return payload


def gemm_floor(B: int, T: int, threads: int = 1, reps: int = 7, n_layer: int = 12,
               C: int = 768, V: int = 50304) -> dict:
    """CPU time of the GEMMs of one GPT-2 fwd+bwd at (B, T) (see the module docstring)."""
    import time

    import torch

    if threads:
        torch.set_num_threads(threads)
    N = B * T
    shapes = [(C, 3 * C), (C, C), (C, 4 * C), (4 * C, C)] * n_layer + [(C, V)]
    g = torch.Generator().manual_seed(0)
    bufs = {}
    for k, o in set(shapes):
        bufs[(k, o)] = (torch.randn(N, k, generator=g), torch.randn(o, k, generator=g),
                        torch.randn(N, o, generator=g), torch.empty(N, o), torch.empty(N, k),
                        torch.empty(o, k))
    times = []
    for _ in range(reps + 1):  # the first touches the buffers
        t0 = time.process_time() if threads == 1 else time.perf_counter()
        for k, o in shapes:
            x, w, dy, y, dx, dw = bufs[(k, o)]
            torch.mm(x, w.t(), out=y)  # forward
            torch.mm(dy, w, out=dx)  # d input
            torch.mm(dy.t(), x, out=dw)  # d weight
        times.append((time.process_time() if threads == 1 else time.perf_counter()) - t0)
    times = sorted(times[1:])
    flop = sum(6 * N * k * o for k, o in shapes)
    return {"min": times[0], "median": times[len(times) // 2], "gflop": flop / 1e9}


def _floors(sizes, threads, reps: int = 7) -> dict:
    out = {}
    for B, T in sizes:
        f = gemm_floor(B, T, threads, reps)
        out[f"B{B},T{T}"] = f
        print(f"  gpt2: B{B},T{T} GEMM floor {f['min'] * 1e3:.0f} ms ({f['gflop']:.0f} GFLOP, "
              f"{f['gflop'] / f['min']:.0f} GFLOP/s)", flush=True)
    return out


def _brief(row: dict) -> str:
    if row.get("status") != "ok":
        return f"{row.get('status')}: {(row.get('reason') or row.get('error') or '')[:200]}"
    t = row["times"]
    vs = (row.get("vs_eager") or {}).get("fwd_bwd")
    return (f"fwd+bwd {bl.fmt_ms(t['fwd_bwd']['min'])} ms"
            + (f" ({vs['median']:.2f}x eager)" if vs else "")
            + f", step {bl.fmt_ms(t['step']['min'])} ms, first step {row['first_call_s']:.1f} s, "
            f"loss {row['first_loss']:.4f}, peak RSS {row.get('rss_peak_mb', 0) / 1024:.2f} GB")


def test_gpt2(benchmark):
    """pytest-benchmark entry point: one round of all cases; numbers in results.json."""
    import render

    payload = bl.benchmark_once(benchmark, run_all, render.gpt2_table)
    # correctness, not timing: every implementation computes the same first loss
    bad = [r for r in payload["rows"] if (r.get("loss_diff_vs_eager") or 0) > 1e-3]
    assert not bad, "; ".join(f"{r['case']}/{r['impl']}: loss differs from eager by "
                              f"{r['loss_diff_vs_eager']:.3g}" for r in bad)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sizes", default=",".join(f"{b}x{t}" for b, t in SIZES))
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--gemm-floor-only", action="store_true",
                    help="measure the GEMM floor only, into the stored gpt2 section")
    a = ap.parse_args(argv)
    import render

    sizes = [tuple(int(v) for v in s.split("x")) for s in a.sizes.split(",")]
    if a.gemm_floor_only:
        floors = _floors(sizes, bl.bench_threads())
        sec = bl.load_results().get("sections", {}).get(SECTION)
        if sec and not a.no_write:
            sec["gemm_floor"] = {**sec.get("gemm_floor", {}), **floors}
            bl.update_section(SECTION, sec)
        return 0
    payload = run_all(sizes, a.impls.split(","), a.quick, write=not a.no_write)
    print(render.gpt2_table(payload))
    return 0


if __name__ == "__main__":
    sys.exit(main())
