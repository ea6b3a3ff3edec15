"""Forward mode and second order: a generated JVP and Hessian-vector product against torch's own.

For layernorm and GELU (tanh), float32, at a small size and a GPT-2-ish one, each at torch's
default thread count and at one thread:

* ``jvp``  ``torch.func.jvp(f, (x,), (v,))``: the output and J v. torchclad: the module's op
           under a torch.func transform, whose jvp is the kernel's generated ``f_pushforward``
           (``torchclad::<op>_jvp``); eager: torch's forward-mode formulas of
           ``F.layer_norm`` / ``F.gelu(approximate="tanh")``.
* ``hvp``  the Hessian-vector product by double backward, ``H v = d/dx <d<f(x), w>/dx, v>``:
           ``y = f(x)``, ``g = grad(<y, w>, x, create_graph=True)`` (*first*), then
           ``grad(g, x, v)`` (*second*, the double backward alone); ``hvp`` = the two. torchclad:
           the op's backward is an op whose backward runs the generated
           ``f_pullback_pushforward`` (forward over reverse, ``torchclad::<op>_hvp``) and
           ``f_pushforward``; eager: torch's double-backward formulas.

``f`` is ``torchclad.nn.LayerNorm(C)`` / ``GELU("tanh")`` against ``torch.nn.functional``
with the same weight and bias (frozen: derivatives w.r.t. x only). Before timing, every worker
checks its results against the same computation in torch ops in float64 (the torchclad
worker also against float64 torchclad); a mismatch is an error row, not a timing.

Each implementation runs in a process of its own (``_worker.py higher ...``: two OpenMP
runtimes never share a process, and each thread count is set before torch loads); the two
processes of a case take turns, round by round (benchlib.run_interleaved), so the per-round
ratios compare calls made under the same load. One thread: process CPU time; more: wall.

Results: section ``higher_order`` of benchmarks/results.json, table in results.md.

    python benchmarks/bench_higher.py [--quick] [--threads 0,1] [--cases layernorm,gelu]
    pytest benchmarks/bench_higher.py --benchmark-only -s
"""

from __future__ import annotations

import argparse
import sys
import time

import benchlib as bl

SECTION = "higher_order"
CASES = ("layernorm", "gelu")
SIZES = {"small": (4, 16, 64), "gpt2": (4, 64, 768)}    # (B, T, C); GELU acts on (B, T, 4C)
THREADS = (0, 1)             # 0 = torch's default, 1 = per core
IMPLS = ("eager", "torchclad")
PHASES = {"hvp": ("first", "second")}


def _clock() -> list[float]:
    return [time.perf_counter(), time.process_time()]


def _lap(t0: list[float]) -> tuple[list[float], list[float]]:
    t1 = _clock()
    return [t1[0] - t0[0], t1[1] - t0[1]], t1


def make_function(name: str, impl: str, weight, bias, dtype):
    """x -> layernorm(x) (weight, bias frozen) or GELU-tanh(x), by ``impl`` in ``dtype``."""
    import torch
    import torch.nn.functional as F

    weight, bias = weight.to(dtype), bias.to(dtype)
    C = weight.numel()
    if impl == "eager":
        if name == "layernorm":
            return lambda x: F.layer_norm(x, (C,), weight, bias, 1e-5)
        return lambda x: F.gelu(x, approximate="tanh")
    if impl != "torchclad":
        raise SystemExit(f"unknown impl {impl!r}")
    import torchclad.nn as tnn

    if name == "layernorm":
        mod = tnn.LayerNorm(C).to(dtype)
        with torch.no_grad():
            mod.weight.copy_(weight)
            mod.bias.copy_(bias)
    else:
        mod = tnn.GELU("tanh")
    for p in mod.parameters():
        p.requires_grad_(False)
    return mod


def run_once(f, x, v, w) -> tuple[tuple, dict]:
    """((output, J v, H v), {phase: [wall, cpu]}) of one JVP and one HVP of ``f`` at ``x``."""
    import torch

    t = _clock()
    out, jv = torch.func.jvp(f, (x,), (v,))
    times = {}
    times["jvp"], t = _lap(t)
    xr = x.detach().requires_grad_()
    (g,) = torch.autograd.grad((f(xr) * w).sum(), xr, create_graph=True)
    times["first"], t = _lap(t)
    (hv,) = torch.autograd.grad(g, xr, v)
    times["second"], t = _lap(t)
    return (out, jv, hv), times


class HigherCase:
    """One (op, size, implementation) in a worker: ``step()`` times one JVP and one HVP."""

    def __init__(self, name: str, size: str, impl: str) -> None:
        import torch

        B, T, C = SIZES[size]
        shape = (B, T, 4 * C) if name == "gelu" else (B, T, C)
        self.size = "x".join(map(str, shape))
        g = torch.Generator().manual_seed(0)
        self.x, self.v, self.w = (torch.randn(shape, generator=g) for _ in range(3))
        weight = 1.0 + 0.1 * torch.randn(C, generator=g)
        bias = 0.1 * torch.randn(C, generator=g)
        self.f = make_function(name, impl, weight, bias, torch.float32)
        self.max_err = self._check(
            make_function(name, "eager", weight, bias, torch.float64),
            make_function(name, impl, weight, bias, torch.float64), f"{name} {impl}")

    def _check(self, want_f, f64, what: str) -> float:
        """The largest error of (output, J v, H v) in float32 against torch ops in float64,
        relative to each result's largest magnitude; raises when float32 is off by more than
        1e-4 or this implementation in float64 by more than 1e-9."""
        import torch

        d = torch.float64
        args = [t.to(d) for t in (self.x, self.v, self.w)]
        want, _ = run_once(want_f, *args)
        worst = 0.0
        for dtype, tol, f in ((d, 1e-9, f64), (torch.float32, 1e-4, self.f)):
            got, _ = run_once(f, *(a.to(dtype) for a in args))
            for name, a, b in zip(("output", "Jv", "Hv"), got, want):
                err = float((a.to(d) - b).abs().max() / b.abs().max().clamp_min(1e-30))
                if not err <= tol:
                    raise RuntimeError(f"{what} {dtype}: {name} is off by {err:.2e} (relative "
                                       f"to its largest element; tolerance {tol:g})")
                if dtype == torch.float32:
                    worst = max(worst, err)
        return worst

    def step(self) -> dict:
        return run_once(self.f, self.x, self.v, self.w)[1]

    def facts(self) -> dict:
        return {"size": self.size, "max_rel_err_f32": self.max_err}


def label(case: str, size: str, threads: int) -> str:
    return f"{case} {size} {bl.thread_tag(threads)}"


def run_all(cases=CASES, thread_counts=THREADS, quick: bool = False, write: bool = True) -> dict:
    warmup, rounds, min_s, max_s = (2, 5, 0.5, 15.0) if quick else (3, 15, 3.0, 40.0)
    machine = bl.machine_info()
    rows, labels = [], []
    for threads in thread_counts:
        for case in cases:
            for size in SIZES:
                lab = label(case, size, threads)
                labels.append(lab)
                res = bl.run_interleaved({i: ["higher", case, size, i] for i in IMPLS},
                                         warmup={i: warmup for i in IMPLS}, rounds=rounds,
                                         min_seconds=min_s, max_seconds=max_s, threads=threads,
                                         min_step_seconds=0.05)
                res = bl.summarize_rows(res, PHASES)
                for impl in IMPLS:
                    row = {"case": lab, "op": case, "size_name": size, "impl": impl, **res[impl]}
                    rows.append(row)
                    print(f"  higher: {lab:22s} {impl:10s} {_brief(row)}", flush=True)
    payload = {
        "machine": machine,
        "method": (f"one process per implementation, both alive together; {warmup} warm-up "
                   f"steps each, then >= {rounds} rounds (>= {min_s} s, <= {max_s} s) of one "
                   "step per implementation (a step = the mean of K back-to-back (jvp, hvp) "
                   "calls, K sized to ~50 ms), order rotating; at torch's default thread count "
                   "and at 1; process CPU time with one thread, else wall; ratio = median over "
                   "rounds of the per-round ratio to eager; results checked against float64 "
                   "torch ops first"),
        "cases": labels, "impls": list(IMPLS), "quick": quick, "rows": rows,
    }
    if write:
        order = [label(c, z, t) for t in THREADS for c in CASES for z in SIZES]
        bl.update_section(SECTION, bl.merged(SECTION, payload, ("case", "impl"), order, "cases"))
    return payload


def _brief(row: dict) -> str:
    failed = bl.failure_text(row)
    if failed:
        return failed
    vs = row.get("vs_eager") or {}
    parts = []
    for ph in ("jvp", "hvp", "second"):
        t = bl.fmt_ms(row["times"][ph]["median"])
        parts.append(f"{ph} {t} ms" + (f" ({vs[ph]['median']:.2f}x eager)" if vs.get(ph) else ""))
    return ", ".join(parts) + f"; max rel err f32 {row.get('max_rel_err_f32', 0):.1e}"


def test_higher_order(benchmark):
    """pytest-benchmark entry point: every case once; numbers in results.json."""
    import render

    payload = benchmark.pedantic(run_all, rounds=1, iterations=1)
    print("\n" + render.higher_order_table(payload))
    for r in payload["rows"]:
        benchmark.extra_info[f"{r['case']}/{r['impl']}"] = (
            r["times"]["hvp"]["median"] if r.get("status") == "ok" else r.get("status"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--threads", default=",".join(map(str, THREADS)))
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args(argv)
    import render

    payload = run_all(a.cases.split(","), [int(t) for t in a.threads.split(",")], a.quick,
                      write=not a.no_write)
    print(render.higher_order_table(payload))
    return 0


if __name__ == "__main__":
    sys.exit(main())
