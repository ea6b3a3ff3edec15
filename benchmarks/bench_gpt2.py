"""GPT-2 training step: torchclad modular, torchclad fused, PyTorch eager, torch.compile.

Three models (reference_models.MODELS): the `make demo` size (2 layers, 4 heads, 128
channels, vocabulary 56, B16 T64), nanoGPT's shakespeare-char configuration (6 layers, 6 heads,
384 channels, vocabulary 65, B8 T256) and GPT-2 small (124M: 12 layers, 12 heads, 768
channels, vocabulary 50304, B4 T64). Each at torch's default thread count (the headline: the
machine's cores, everyone's OpenMP and BLAS threads) and at one thread (the per-core row). A
step = forward with targets, loss.backward(), AdamW.step(); forward, backward and the
optimizer are timed apart, and the comparison is on forward + backward (AdamW is the same code
for every implementation).

* ``torchclad``        ``torchclad.nn.GPT2(config)``: autograd chains the layers' generated sweeps
* ``torchclad_fused``  ``GPT2(config, fused=True)``: one generated sweep for the whole model
* ``torchclad_fused_mkl``  the same with MKL's GEMMs (``TORCHCLAD_BLAS=mkl``); run only where
                       torchclad picks another BLAS on this CPU (numpy's OpenBLAS on AMD)
* ``eager``            a plain-PyTorch GPT-2 (benchmarks/reference_models.py), same weights
* ``compile``          ``torch.compile(<that model>, dynamic=True)``; the first step
                       (compilation included) is reported apart

Every implementation runs in a process of its own (two OpenMP runtimes in one process disturb
each other; peak RSS of its own); the four processes of one case stay alive together and take
turns, one step each per round, so the per-round ratios compare steps run under the same
machine load (benchlib.run_interleaved). With one thread the clock is the process CPU time,
with more the wall clock. All implementations get the same weights (copied by parameter name),
so their first losses must agree (checked). A model that is missing or fails is a row with its
reason.

The GEMM floor of a case (stored per case): the forward, d-input and d-weight sgemm of each
linear layer (4 per block and the lm_head), replayed with ``torch.mm`` into preallocated outputs
at the case's thread count (``GemmReplay``). Every implementation here that runs these GEMMs
through MKL is bounded by it; where torchclad picks numpy's OpenBLAS (torchclad.builtin.blas)
the torchclad models can run below it, and ``torchclad_fused_mkl`` is the fused model on MKL.
The replay is one more process of the case, ``gemm_floor``, taking its turn in every round like
the models (its "step" is the replay, its forward the forward GEMMs): its minimum is the floor,
and each implementation's per-round ratio to it is stored too. Measured once, after the rounds, a floor read the host's state of that
moment: at one thread it came out above the fused step (2.08 s against 1.52 s at 124M on
2026-11-29), where a replay run later took 1.36 s. ``--gemm-floor-only`` still measures it
alone.

Results: section ``gpt2`` of benchmarks/results.json, table in results.md.

    python benchmarks/bench_gpt2.py [--quick] [--models demo,shakespeare,gpt2] [--threads 0,1]
                                    [--impls eager,torchclad_fused]
    python benchmarks/bench_gpt2.py --gemm-floor-only   # (re)measure the floors only
    pytest benchmarks/bench_gpt2.py --benchmark-only -s
"""

from __future__ import annotations

import argparse
import os
import sys

import benchlib as bl
import reference_models as ref

SECTION = "gpt2"
MODELS = tuple(ref.MODELS)
THREADS = (0, 1)            # 0 = torch's default (the headline), 1 = per core
IMPLS = ("eager", "torchclad", "torchclad_fused", "compile", "gemm_floor")


def default_impls() -> tuple[str, ...]:
    """IMPLS, and where torchclad's GEMMs are not MKL's on this CPU (torchclad.builtin.blas: numpy's
    OpenBLAS on AMD), the fused model with MKL's as well (``torchclad_fused_mkl``): what the
    choice of BLAS gives, measured in the same rounds."""
    from torchclad.builtin import blas

    return IMPLS + (("torchclad_fused_mkl",) if blas.auto_choice() != "mkl" else ())


def label(model: str, threads: int) -> str:
    """The case label: model, (B, T) and thread count (`demo B16,T64 2thr`)."""
    B, T = ref.MODELS[model][1]
    return f"{model} B{B},T{T} {bl.thread_tag(threads)}"


def run_all(models=MODELS, thread_counts=THREADS, impls=None, quick: bool = False,
            write: bool = True) -> dict:
    impls = tuple(impls or default_impls())
    rounds, max_s = (2, 10.0) if quick else (12, 90.0)
    machine = bl.machine_info()
    rows, cases, floors = [], [], {}
    for threads in thread_counts:
        for model in models:
            B, T = ref.MODELS[model][1]
            case = label(model, threads)
            cases.append(case)
            big = 3.5 if model == "gpt2" else 1.0  # GB per model process
            # the GEMM replay: peak RSS 0.24-0.72 GB (demo to 124M)
            mem = {impl: 1.0 if impl == "gemm_floor" else big for impl in impls}
            res = bl.run_interleaved({impl: ["gpt2", impl, model, str(B), str(T)]
                                      for impl in impls},
                                     warmup={impl: 3 if impl == "compile" else 2 for impl in impls},
                                     rounds=rounds, min_seconds=0.0, max_seconds=max_s,
                                     threads=threads, setup_timeout=1500, mem_per_worker_gb=mem,
                                     min_step_seconds=0.0 if model == "gpt2" else 0.2)
            res = bl.summarize_rows(res, {"fwd_bwd": ("forward", "backward"),
                                          "step": ("forward", "backward", "optimizer")},
                                    also=("gemm_floor",) if "gemm_floor" in impls else ())
            losses = {i: r["first_loss"] for i, r in res.items()
                      if r.get("status") == "ok" and "first_loss" in r}
            for impl in impls:
                row = {"case": case, "model": model, "B": B, "T": T, **res[impl]}
                if impl in losses and "eager" in losses:  # same weights and tokens: same loss
                    row["loss_diff_vs_eager"] = abs(losses[impl] - losses["eager"])
                rows.append(row)
                print(f"  gpt2: {case} {impl:16s} {_brief(row)}", flush=True)
            floor = _floor_of_row(res["gemm_floor"], res) if "gemm_floor" in res else None
            floors[case] = floor or _floor_in_process(model, threads, 2 if quick else 7)
    payload = {
        "machine": machine,
        "method": ("one process per implementation, all alive together (one at a time if memory "
                   "is short); 2 warm-up steps (3 for compile), then >= 2 and up to "
                   f"{rounds} rounds (stopping after {max_s:.0f} s) of one step per "
                   "implementation (the small models: steps repeated to >= 0.2 s), order "
                   "rotating; at torch's default thread count and at 1; process CPU time with "
                   "one thread, else wall; ratio = median over rounds of the per-round "
                   "forward+backward ratio to eager; AdamW timed apart"),
        "cases": cases, "impls": list(impls), "quick": quick, "rows": rows,
        "gemm_floor": floors,
    }
    if write:
        order = [label(m, t) for t in THREADS for m in MODELS]
        # a run of every default implementation replaces its cases whole: a row it did not
        # measure (torchclad_fused_mkl, measured on another CPU) must not stand beside its rows;
        # an --impls run replaces only the rows it measured
        whole = set(impls) >= set(default_impls())
        sec = bl.merged(SECTION, payload, ("case",) if whole else ("case", "impl"), order,
                        "cases")
        old = bl.load_results().get("sections", {}).get(SECTION) or {}
        sec["gemm_floor"] = {**old.get("gemm_floor", {}), **payload["gemm_floor"]}
        bl.update_section(SECTION, sec)
    return payload


class GemmReplay:
    """The sgemms of one fwd+bwd of `model`: forward, d input and d weight of each linear layer
    (4 per block and the lm_head), with ``torch.mm`` into preallocated outputs; one buffer set
    per shape (a replay with distinct buffers per layer measured the same at 124M)."""

    def __init__(self, model: str, B: int | None = None, T: int | None = None) -> None:
        import torch

        cfg, (B0, T0) = ref.MODELS[model]
        B, T = B or B0, T or T0
        N, C, V, L = B * T, cfg["n_embd"], cfg["vocab_size"], cfg["n_layer"]
        self.shapes = [(C, 3 * C), (C, C), (C, 4 * C), (4 * C, C)] * L + [(C, V)]
        g = torch.Generator().manual_seed(0)
        self.bufs = {}
        for k, o in set(self.shapes):
            self.bufs[(k, o)] = (torch.randn(N, k, generator=g), torch.randn(o, k, generator=g),
                                 torch.randn(N, o, generator=g), torch.empty(N, o),
                                 torch.empty(N, k), torch.empty(o, k))
        self.gflop = sum(6 * N * k * o for k, o in self.shapes) / 1e9

    def forward(self) -> None:
        import torch

        for k, o in self.shapes:
            x, w, _, y, _, _ = self.bufs[(k, o)]
            torch.mm(x, w.t(), out=y)

    def backward(self) -> None:
        import torch

        for k, o in reversed(self.shapes):
            x, w, dy, _, dx, dw = self.bufs[(k, o)]
            torch.mm(dy, w, out=dx)  # d input
            torch.mm(dy.t(), x, out=dw)  # d weight


def gemm_floor(model: str, threads: int = 1, reps: int = 7) -> dict:
    """Time of the GEMMs of one fwd+bwd of `model` (GemmReplay), alone in this process."""
    import time

    import torch

    if threads:
        torch.set_num_threads(threads)
    replay = GemmReplay(model)
    times = []
    for _ in range(reps + 1):  # the first touches the buffers
        t0 = time.process_time() if threads == 1 else time.perf_counter()
        replay.forward()
        replay.backward()
        times.append((time.process_time() if threads == 1 else time.perf_counter()) - t0)
    times = sorted(times[1:])
    return {"min": times[0], "median": times[len(times) // 2], "gflop": replay.gflop}


def _floor_of_row(row: dict, rows: dict) -> dict | None:
    """The GEMM floor of a case from its interleaved gemm_floor row: fwd+bwd minimum and
    median, and per implementation the per-round ratios to it (benchlib.paired)."""
    if row.get("status") != "ok":
        return None
    t = row["times"]["fwd_bwd"]
    return {"min": t["min"], "median": t["median"], "gflop": row["gflop"], "interleaved": True,
            "vs_floor": {i: (r.get("vs_gemm_floor") or {}).get("fwd_bwd")
                         for i, r in rows.items() if i != "gemm_floor"}}


def _floor_in_process(model: str, threads: int, reps: int) -> dict:
    """gemm_floor in a fresh process (the thread count is set before torch loads)."""
    import json
    import subprocess

    env = dict(os.environ)
    if threads:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    out = subprocess.run([sys.executable, __file__, "--floor-worker", model, str(threads),
                          str(reps)], capture_output=True, text=True, env=env, timeout=3600)
    f = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"  gpt2: {label(model, threads)} GEMM floor {f['min'] * 1e3:.1f} ms "
          f"({f['gflop']:.1f} GFLOP, {f['gflop'] / f['min']:.0f} GFLOP/s)", flush=True)
    return f


def _brief(row: dict) -> str:
    failed = bl.failure_text(row)
    if failed:
        return failed
    t = row["times"]
    vs = (row.get("vs_eager") or {}).get("fwd_bwd")
    return (f"fwd+bwd {bl.fmt_ms(t['fwd_bwd']['min'])} ms"
            + (f" ({vs['median']:.2f}x eager)" if vs else "")
            + f", step {bl.fmt_ms(t['step']['min'])} ms, first step {row['first_call_s']:.1f} s, "
            + (f"loss {row['first_loss']:.4f}, " if "first_loss" in row else "")
            + f"peak RSS {row.get('rss_peak_mb', 0) / 1024:.2f} GB")


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
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--threads", default=",".join(map(str, THREADS)),
                    help="thread counts, 0 = torch's default")
    ap.add_argument("--impls", default="",
                    help=f"comma-separated, from {','.join(IMPLS)},torchclad_fused_mkl "
                         "(default: default_impls())")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--gemm-floor-only", action="store_true",
                    help="measure the GEMM floors only, into the stored gpt2 section")
    ap.add_argument("--floor-worker", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.floor_worker:
        import json
        model, threads, reps = a.floor_worker
        print(json.dumps(gemm_floor(model, int(threads), int(reps))))
        return 0
    import render

    models = a.models.split(",")
    threads = [int(t) for t in a.threads.split(",")]
    if a.gemm_floor_only:
        floors = {label(m, t): _floor_in_process(m, t, 7) for t in threads for m in models}
        sec = bl.load_results().get("sections", {}).get(SECTION)
        if sec and not a.no_write:
            sec["gemm_floor"] = {**sec.get("gemm_floor", {}), **floors}
            bl.update_section(SECTION, sec)
        return 0
    impls = [i for i in a.impls.split(",") if i] or None
    payload = run_all(models, threads, impls, a.quick, write=not a.no_write)
    print(render.gpt2_table(payload))
    return 0


if __name__ == "__main__":
    sys.exit(main())
