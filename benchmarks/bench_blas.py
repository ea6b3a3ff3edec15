"""Which BLAS is the fastest sgemm here: torch's (MKL) or numpy's (OpenBLAS)?

The step of every model in bench_gpt2.py is bounded below by its GEMMs: the forward, d-input
and d-weight sgemm of each linear layer (4 per block and the lm_head). This replays them
(``gemm_shapes``) with each library into preallocated outputs:

* ``mkl``       ``torch.mm(..., out=)``: the BLAS inside libtorch_cpu (MKL), which torchclad's
                matmul custom derivative calls (csrc/custom/matmul.cpp)
* ``openblas``  ``numpy.matmul(..., out=)``: numpy's bundled OpenBLAS (the PyPI wheel's)

At more than one thread ``numpy.matmul`` runs OpenBLAS's own thread pool; torchclad instead
calls it single-threaded from each OpenMP thread on a block of the output (matmul_gemm_split
in csrc/kernels/matmul.cpp), whose effect on the models bench_gpt2.py shows (fused against
torchclad_fused_mkl).

Each library runs in a process of its own (two threading runtimes in one process disturb each
other), the two alternating, `rounds` times; a process runs `reps` replays and reports their
minimum, per shape and in total. Ratio = openblas / mkl of the per-round totals (median and
p10-p90); < 1 means OpenBLAS is faster. At 1 thread and at the default thread count.

Results: section ``blas`` of benchmarks/results.json, table in results.md.

    python benchmarks/bench_blas.py [--cases demo,shakespeare,gpt2] [--threads 1,0] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

#: the models of bench_gpt2.py: layers, channels, vocabulary, rows (B * T)
CASES = {
    "demo": dict(L=2, C=128, V=56, N=16 * 64),
    "shakespeare": dict(L=6, C=384, V=65, N=8 * 256),
    "gpt2": dict(L=12, C=768, V=50304, N=4 * 64),
}


def _worker(lib: str, case: str, reps: int) -> dict:
    import numpy as np

    cfg = CASES[case]
    shapes = [(k, o) for k, o in [(cfg["C"], 3 * cfg["C"]), (cfg["C"], cfg["C"]),
                                  (cfg["C"], 4 * cfg["C"]), (4 * cfg["C"], cfg["C"])]]
    shapes = shapes * cfg["L"] + [(cfg["C"], cfg["V"])]
    N = cfg["N"]
    rng = np.random.default_rng(0)
    bufs = {}
    for k, o in set(shapes):
        x = rng.standard_normal((N, k), dtype=np.float32)
        w = rng.standard_normal((o, k), dtype=np.float32)
        dy = rng.standard_normal((N, o), dtype=np.float32)
        bufs[(k, o)] = [x, w, dy, np.empty((N, o), np.float32), np.empty((N, k), np.float32),
                        np.empty((o, k), np.float32)]
    if lib == "mkl":
        import torch

        bufs = {s: [torch.from_numpy(a) for a in b] for s, b in bufs.items()}
        mm = lambda a, b, out: torch.mm(a, b, out=out)  # noqa: E731
        T = lambda a: a.t()  # noqa: E731
        threads = torch.get_num_threads()
    else:
        mm = lambda a, b, out: np.matmul(a, b, out=out)  # noqa: E731
        T = lambda a: a.T  # noqa: E731
        threads = int(os.environ.get("OPENBLAS_NUM_THREADS", "0")) or os.cpu_count()
    clock = time.process_time if threads == 1 else time.perf_counter
    per = {}
    totals = []
    for r in range(reps + 1):                     # the first touches the buffers
        t_all = 0.0
        for i, (k, o) in enumerate(shapes):
            x, w, dy, y, dx, dw = bufs[(k, o)]
            for what, a, b, out in (("fwd", x, T(w), y), ("dx", dy, w, dx), ("dw", T(dy), x, dw)):
                t0 = clock()
                mm(a, b, out)
                dt = clock() - t0
                t_all += dt
                if r:
                    key = f"{N}x{k}x{o}:{what}"
                    per[key] = min(per.get(key, dt), dt)
        if r:
            totals.append(t_all)
    return {"lib": lib, "case": case, "threads": threads, "total_min": min(totals),
            "totals": totals, "per_shape_min": per}


def _run(lib: str, case: str, threads: int, reps: int) -> dict:
    env = dict(os.environ)
    if threads > 0:
        for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[v] = str(threads)
    out = subprocess.run([sys.executable, __file__, "--worker", lib, "--cases", case,
                          "--reps", str(reps)], capture_output=True, text=True, env=env,
                         timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_all(cases, thread_counts, rounds: int = 5, reps: int = 5, write: bool = True) -> dict:
    import benchlib as bl

    rows = []
    for threads in thread_counts:
        for case in cases:
            got = {"mkl": [], "openblas": []}
            for r in range(rounds):                      # alternate, rotating who goes first
                for lib in (("mkl", "openblas") if r % 2 == 0 else ("openblas", "mkl")):
                    got[lib].append(_run(lib, case, threads, reps))
            ratios = [o["total_min"] / m["total_min"] for m, o in zip(got["mkl"], got["openblas"])]
            shapes = {}
            for key in got["mkl"][0]["per_shape_min"]:
                m = min(g["per_shape_min"][key] for g in got["mkl"])
                o = min(g["per_shape_min"][key] for g in got["openblas"])
                shapes[key] = {"mkl_ms": m * 1e3, "openblas_ms": o * 1e3, "ratio": o / m}
            st = bl.stats(ratios)
            row = {"case": case, "threads": got["mkl"][0]["threads"],
                   "mkl_ms": min(g["total_min"] for g in got["mkl"]) * 1e3,
                   "openblas_ms": min(g["total_min"] for g in got["openblas"]) * 1e3,
                   "ratio": {"median": st["median"], "p10": st["p10"], "p90": st["p90"]},
                   "shapes": shapes}
            rows.append(row)
            print(f"  blas: {case} threads={row['threads']}: MKL {row['mkl_ms']:.2f} ms, "
                  f"OpenBLAS {row['openblas_ms']:.2f} ms, OpenBLAS/MKL {st['median']:.3f} "
                  f"({st['p10']:.3f}-{st['p90']:.3f})", flush=True)
    payload = {"machine": bl.machine_info(),
               "method": (f"each library in its own process, alternating, {rounds} rounds of "
                          f"{reps} replays (minimum per process); ratio = median over rounds of "
                          "openblas / mkl totals"), "rows": rows}
    if write:
        bl.update_section("blas", payload)
    return payload


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--threads", default="1,0", help="thread counts; 0 = the default")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--worker", choices=["mkl", "openblas"])
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args(argv)
    if a.worker:
        print(json.dumps(_worker(a.worker, a.cases, a.reps)))
        return 0
    run_all(a.cases.split(","), [int(t) for t in a.threads.split(",")], a.rounds, a.reps,
            write=not a.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
