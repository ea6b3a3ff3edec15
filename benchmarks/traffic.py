"""The memory traffic of a fused GPT-2 step outside its GEMMs, and what it costs on this machine.

Counts the values each non-GEMM pass of one forward + generated reverse sweep reads and writes,
as the kernels are laid out today (csrc/kernels/gpt2.cpp: one pass per layer kernel, bias fills
and d-bias reductions around the GEMMs, adjoints accumulated (read + write) and reset as they are
read), and measures the streaming bandwidth of this machine (torch copy / triad / fill over a
working set the size of the demo arena) at 1 and at torch's default thread count. traffic /
bandwidth + the step's GEMM floor (bench_gpt2.py) bounds what this design can reach: the
README's Performance section quotes it.

    python benchmarks/traffic.py [--model demo|shakespeare|gpt2]
"""

from __future__ import annotations

import argparse
import time

import torch

from reference_models import MODELS


def passes(cfg: dict, B: int, T: int) -> dict[str, float]:
    """Values read + written per pass, summed over the layers (float32: 4 bytes each)."""
    N, C, V, L, NH = B * T, cfg["n_embd"], cfg["vocab_size"], cfg["n_layer"], cfg["n_head"]
    NC, TT = N * C, B * NH * T * T
    per_layer = {
        # forward
        "layernorm x2 (read x, write out)": 4 * NC,
        "bias fills before the GEMMs (qkv, attproj, fc, fcproj)": 9 * NC,
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
    return out


def bandwidth(threads: int, mb: int = 24) -> float:
    """Median GB/s of copy, triad and fill over `mb` MB arrays, the lowest of the three."""
    torch.set_num_threads(threads)
    n = mb * 2**20 // 4
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="demo", choices=sorted(MODELS))
    args = ap.parse_args(argv)
    cfg, (B, T) = MODELS[args.model]
    table = passes(cfg, B, T)
    total = sum(table.values()) * 4 / 1e6
    for name, v in table.items():
        print(f"  {v * 4 / 1e6:8.1f} MB  {name}")
    print(f"  {total:8.1f} MB  in all ({args.model}, B{B} T{T})")
    default = torch.get_num_threads()
    for threads in sorted({1, default}):
        gbs = bandwidth(threads)
        print(f"  {threads} thread(s): {gbs:5.1f} GB/s -> {total / gbs:5.2f} ms of passes per step")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
