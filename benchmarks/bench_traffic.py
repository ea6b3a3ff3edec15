"""The memory traffic of a fused GPT-2 step outside its GEMMs, and the bound it sets.

Counts the values each non-GEMM pass of one forward + generated reverse sweep reads and writes,
as the kernels are laid out today (csrc/kernels/gpt2.cpp: one pass per layer kernel, bias
additions and d-bias reductions around the GEMMs, adjoints accumulated (read + write) and reset
as they are read, the gradient buffer zero-filled), and measures the streaming bandwidth of this
machine (torch copy / triad / fill) at 1 and at torch's default thread count, twice: over 24 MB
arrays (a working set the size of the demo model's arena, which the cache holds) and over arrays
the size of the model's own working set (its activation arena and their adjoints, see
working_set_mb). traffic / the 24 MB bandwidth + the step's GEMM floor bounds what this design
can reach; at the larger models, whose working set outgrows the cache, the same traffic at the
working set's (memory's) rate is what the passes cost if none of them found its data in cache:
a pessimistic estimate, between which and the bound a step of this design lies. The GEMM floor
+ attention's causal products (attention_gflop) bounds any design. The floor and the eager /
fused times are read from the gpt2 section of benchmarks/results.json (bench_gpt2.py, which
`make bench` runs before this module), copied into this section with the date of that run.

Results: section ``traffic`` of benchmarks/results.json, table in results.md (quoted by the
README's Performance section).

    python benchmarks/bench_traffic.py [--models demo,shakespeare,gpt2] [--no-write]
"""

from __future__ import annotations

import argparse
import time

import torch

import benchlib as bl
import results as res
from bench_gpt2 import label
from reference_models import MODELS


def passes(cfg: dict, B: int, T: int) -> dict[str, float]:
    """Values read + written per pass, summed over the layers (float32: 4 bytes each)."""
    N, C, V, L, NH = B * T, cfg["n_embd"], cfg["vocab_size"], cfg["n_layer"], cfg["n_head"]
    NC, TT = N * C, B * NH * T * T
    per_layer = {
        # forward
        "layernorm x2 (read x, write out)": 4 * NC,
        "bias additions after the GEMMs (qkv, attproj, fc, fcproj; read + write out)": 18 * NC,
        "softmax (read scores, mask, write probabilities)": 2.5 * TT,
        "residual x2 (two reads, one write)": 6 * NC,
        "GELU (read, write)": 8 * NC,
        # reverse sweep
        "residual sweeps x2 (read + reset d out, two d in read + write)": 12 * NC,
        "d bias reductions + d out resets (qkv, attproj, fc, fcproj)": 18 * NC,
        "GELU sweep (x, d out, reset, d in read + write)": 20 * NC,
        "layernorm sweeps x2 (d out, reset, x twice, d in read + write)": 14 * NC,
        "softmax sweep (probabilities, d probs, reset, d scores read + write, scores)": 6 * TT,
    }
    out = {k: v * L for k, v in per_layer.items()}
    out["final layernorm, encoder, lm_head bias, cross-entropy (fwd + sweep)"] = (
        11 * NC + 6 * N * V)
    params = (V + cfg["block_size"]) * C + L * (12 * C * C + 13 * C) + 2 * C + V
    out["zero fill of the flat gradient buffer (every parameter's slot)"] = params
    return out


def attention_gflop(cfg: dict, B: int, T: int) -> float:
    """Attention's six products (two forward, four backward: the scores, the weighted sum and
    their adjoints) over the causal half only, in GFLOP: outside the linear layers' GEMM floor,
    and no design skips them."""
    C, L, NH = cfg["n_embd"], cfg["n_layer"], cfg["n_head"]
    causal_product = T * T * (C // NH)  # 2 T^2 hs flops for the full product, half of it causal
    return 6 * causal_product * B * NH * L / 1e9


def working_set_mb(cfg: dict, B: int, T: int) -> float:
    """The fused model's activation arena and its adjoints (the same size), in MB: what its
    non-GEMM passes stream over (torchclad.nn.gpt2.fused.arena_size, float32)."""
    from types import SimpleNamespace

    from torchclad.nn.gpt2.fused import arena_size

    return 2 * arena_size(SimpleNamespace(**cfg), B, T) * 4 / 1e6


def bandwidth(threads: int, mb: float = 24) -> float:
    """Median GB/s of copy, triad and fill over `mb` MB arrays, the lowest of the three."""
    torch.set_num_threads(threads)
    n = int(mb * 2**20) // 4
    a, b, c = torch.randn(n), torch.randn(n), torch.empty(n)
    kernels = ((lambda: c.copy_(a), 8 * n), (lambda: torch.add(a, b, alpha=2.0, out=c), 12 * n),
               (lambda: c.fill_(1.0), 4 * n))
    rates = []
    for f, nbytes in kernels:
        for _ in range(3):
            f()
        ts = []
        for _ in range(15):
            t = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t)
        rates.append(nbytes / sorted(ts)[len(ts) // 2] / 1e9)
    return min(rates)


def _gpt2_case(case: str) -> dict:
    """The GEMM floor and the eager / fused fwd+bwd minima (s) of a bench_gpt2 case, if stored."""
    sec = res.load_results().get("sections", {}).get("gpt2") or {}
    out = {"gpt2_run": (sec.get("machine") or {}).get("date")}
    floor = (sec.get("gemm_floor") or {}).get(case)
    if floor:
        out["gemm_floor_s"], out["gemm_floor_gflop"] = floor["min"], floor["gflop"]
    for r in sec.get("rows", []):
        if r.get("case") == case and r.get("status") == "ok" and r["impl"] in (
                "eager", "torchclad_fused"):
            out[f"{r['impl']}_s"] = r["times"]["fwd_bwd"]["min"]
    return out


def run_all(models=("demo", "shakespeare", "gpt2"), thread_counts=(0, 1),
            write: bool = True) -> dict:
    rows = []
    default = bl.default_threads()
    for threads in [t or default for t in thread_counts]:
        gbs = bandwidth(threads)
        for model in models:
            cfg, (B, T) = MODELS[model]
            mb = sum(passes(cfg, B, T).values()) * 4 / 1e6
            ws = working_set_mb(cfg, B, T)
            # over arrays of the working set's size (no more than the cached rate: noise)
            mem = min(gbs, bandwidth(threads, ws)) if ws > 24 else gbs
            case = label(model, threads)
            row = {"case": case, "model": model, "threads": threads,
                   "traffic_mb": mb, "gb_per_s": gbs, "passes_s": mb / gbs / 1e3,
                   "working_set_mb": ws, "gb_per_s_memory": mem,
                   "passes_memory_s": mb / mem / 1e3,
                   "attention_gflop": attention_gflop(cfg, B, T), **_gpt2_case(case)}
            rows.append(row)
            print(f"  traffic: {case}: {mb:.1f} MB of non-GEMM passes at {gbs:.1f} GB/s = "
                  f"{row['passes_s'] * 1e3:.2f} ms per step; over the {ws:.0f} MB working set "
                  f"{mem:.1f} GB/s = {row['passes_memory_s'] * 1e3:.2f} ms", flush=True)
        torch.set_num_threads(default)  # the modules make bench runs after this one
    payload = {"machine": bl.machine_info(),
               "method": "bandwidth: the lowest of torch copy / triad / fill medians over "
                         "24 MB arrays (the bound's rate) and over arrays the size of the "
                         "model's working set (activation arena + adjoints; from memory)",
               "rows": rows}
    if write:
        bl.update_section("traffic", payload)
    return payload


def test_traffic(benchmark):
    """pytest-benchmark entry point: the counts and the bandwidth; numbers in results.json."""
    import render

    payload = benchmark.pedantic(run_all, rounds=1, iterations=1)
    print("\n" + render.traffic_table(payload))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="demo,shakespeare,gpt2")
    ap.add_argument("--passes", default="", help="print the pass table of one model and exit")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    if args.passes:
        cfg, (B, T) = MODELS[args.passes]
        for name, v in passes(cfg, B, T).items():
            print(f"  {v * 4 / 1e6:8.1f} MB  {name}")
        return 0
    run_all(args.models.split(","), write=not args.no_write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
