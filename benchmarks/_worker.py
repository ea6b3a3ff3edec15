"""One benchmark case in a fresh process (run by bench_components.py / bench_gpt2.py through
benchlib.run_worker), so that its peak RSS is its own.

    python benchmarks/_worker.py component <name> <impl> [--warmup N] [--steps N] [--min-seconds S] [--threads N]
    python benchmarks/_worker.py gpt2 <impl> <B> <T> [--warmup N] [--steps N] [--max-seconds S] [--threads N]

component: matmul | attention | layernorm | gelu | crossentropy;  impl: torchclad | eager | compile
gpt2 impl: torchclad | torchclad_fused | eager | compile

``--threads N`` (default 1; 0 = torch's default) sets OMP_NUM_THREADS / MKL_NUM_THREADS before
torch is imported, and torch.set_num_threads.

Prints one JSON line: status ("ok", "unavailable" with a reason, or "error"), per-phase time
samples in seconds -- ``times`` by the wall clock, ``cpu_times`` by the process's CPU clock
(user + sys, every thread: with one thread this is the wall time minus the time spent
descheduled) -- the first call's wall time (for compile: compilation included), and memory:

* ``rss_peak_mb``      ru_maxrss of the process at the end (torch import, setup and the steps);
* ``rss_base_mb``      resident size after setup and warm-up, when the high-water mark is reset
                       (``/proc/self/clear_refs``);
* ``rss_step_peak_mb`` the high-water mark over the timed steps (VmHWM), so
                       ``rss_step_peak_mb - rss_base_mb`` is what a step needs on top.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# ---- clocks


class Clock:
    """Marks phases of one step by the wall and the process CPU clock."""

    def __init__(self) -> None:
        self.w = time.perf_counter()
        self.c = time.process_time()

    def lap(self) -> tuple[float, float]:
        w, c = time.perf_counter(), time.process_time()
        out = (w - self.w, c - self.c)
        self.w, self.c = w, c
        return out


def _series(steps: list[dict], phases: tuple[str, ...], k: int) -> dict[str, list[float]]:
    out = {p: [st[p][k] for st in steps] for p in phases}
    return out


def _timings(steps: list[dict], phases: tuple[str, ...], sums: dict[str, tuple[str, ...]]) -> dict:
    res = {}
    for key, k in (("times", 0), ("cpu_times", 1)):
        ser = _series(steps, phases, k)
        for name, parts in sums.items():
            ser[name] = [sum(ser[p][i] for p in parts) for i in range(len(steps))]
        res[key] = ser
    return res


# ---- memory


def _status_kb(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def memory(reset_ok: bool, base_kb: int | None) -> dict:
    out = {"rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if reset_ok and base_kb is not None:
        hwm = _status_kb("VmHWM")
        out["rss_base_mb"] = base_kb / 1024
        out["rss_step_peak_mb"] = hwm / 1024 if hwm is not None else None
    return out


class Unavailable(Exception):
    """The module under test does not exist yet (another helper is still writing it)."""


def _torchclad_nn(*names: str):
    try:
        import torchclad.nn as tnn
    except Exception as e:  # noqa: BLE001 - whatever breaks the import, report it
        raise Unavailable(f"torchclad.nn does not import: {type(e).__name__}: {e}") from None
    missing = [n for n in names if not hasattr(tnn, n)]
    if missing:
        raise Unavailable(f"not available yet: torchclad.nn.{', '.join(missing)}")
    return tnn


# ---- components


SIZES = {"B": 4, "T": 64, "C": 768, "NH": 12, "V": 50304}


def component(name: str, impl: str):
    """(module, inputs, grad_output or None, size label). Same weights for every impl."""
    import torch

    import reference_models as ref

    B, T, C, NH, V = (SIZES[k] for k in ("B", "T", "C", "NH", "V"))
    cfg = ref.Config(block_size=T, n_head=NH, n_embd=C)
    g = torch.Generator().manual_seed(0)
    randn = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    tc = impl == "torchclad"

    if name == "matmul":
        mod = (_torchclad_nn("Linear").Linear if tc else torch.nn.Linear)(C, C)
        x, label = randn(B, T, C), f"B{B},T{T},C{C},OC{C}"
    elif name == "attention":
        mod = _torchclad_nn("CausalSelfAttention").CausalSelfAttention(cfg) if tc else ref.SelfAttention(cfg)
        x, label = randn(B, T, C), f"B{B},T{T},C{C},NH{NH}"
    elif name == "layernorm":
        mod = (_torchclad_nn("LayerNorm").LayerNorm if tc else torch.nn.LayerNorm)(C)
        x, label = randn(B, T, C), f"B{B},T{T},C{C}"
    elif name == "gelu":
        mod = (_torchclad_nn("GELU").GELU if tc else torch.nn.GELU)(approximate="tanh")
        x, label = randn(B, T, 4 * C), f"N={B}*{T}*{4 * C}"
    elif name == "crossentropy":
        mod = (_torchclad_nn("CrossEntropyLoss").CrossEntropyLoss if tc else torch.nn.CrossEntropyLoss)()
        x = randn(B * T, V)
        targets = torch.randint(0, V, (B * T,), generator=g)
        mod_loss = mod
        mod = _BoundTargets(mod_loss, targets)
        label = f"B{B},T{T},V{V}"
    else:
        raise SystemExit(f"unknown component {name!r}")

    # identical parameters across impls: re-initialise from one seed, in name order
    with torch.no_grad():
        pg = torch.Generator().manual_seed(1)
        for pname, p in sorted(mod.named_parameters()):
            p.copy_(torch.randn(p.shape, generator=pg) * (0.02 if p.dim() > 1 else 0.1)
                    + (1.0 if pname.endswith("weight") and p.dim() == 1 else 0.0))
    x.requires_grad_(True)
    grad_out = None if name == "crossentropy" else randn(*x.shape)
    return mod, x, grad_out, label


class _BoundTargets:
    """loss_fn(x, targets) as a one-argument callable (for torch.compile and the timing loop)."""

    def __init__(self, loss_fn, targets):
        self.loss_fn, self.targets = loss_fn, targets

    def __call__(self, x):
        return self.loss_fn(x, self.targets)

    def named_parameters(self):
        return iter(())

    def parameters(self):
        return iter(())


def run_component(name: str, impl: str, warmup: int, steps: int, min_seconds: float) -> dict:
    import torch

    torch.manual_seed(0)
    mod, x, gout, label = component(name, impl)
    fn = mod
    if impl == "compile":
        fn = torch.compile(mod if isinstance(mod, torch.nn.Module) else mod.__call__)
    params = list(mod.parameters())

    def step() -> dict:
        x.grad = None
        for p in params:
            p.grad = None
        clk = Clock()
        y = fn(x)
        fwd = clk.lap()
        if gout is None:
            y.backward()
        else:
            y.backward(gout)
        return {"forward": fwd, "backward": clk.lap()}

    first = step()
    for _ in range(max(0, warmup - 1)):
        step()
    reset_ok = reset_peak()
    base = _status_kb("VmRSS")
    steps_done: list[dict] = []
    t_start = time.perf_counter()
    while len(steps_done) < steps or (time.perf_counter() - t_start < min_seconds
                                      and len(steps_done) < 50 * steps):
        steps_done.append(step())
    return {"status": "ok", "case": name, "impl": impl, "size": label,
            "first_call_s": first["forward"][0] + first["backward"][0],
            **_timings(steps_done, ("forward", "backward"), {"fwd_bwd": ("forward", "backward")}),
            **memory(reset_ok, base)}


# ---- GPT-2


def gpt2_model(impl: str):
    import torch

    if impl in ("torchclad", "torchclad_fused"):
        tnn = _torchclad_nn("GPT2", "GPT2Config")
        model = tnn.GPT2(tnn.GPT2Config(), fused=impl == "torchclad_fused")
    else:
        import reference_models as ref

        model = ref.GPT2(ref.Config())
    # the same weights for every impl (the names match: nanoGPT / llm.c naming)
    with torch.no_grad():
        pg = torch.Generator().manual_seed(1)
        for name, p in sorted(model.named_parameters()):
            if p.dim() > 1:
                p.copy_(torch.randn(p.shape, generator=pg) * 0.02)
    return model


def run_gpt2(impl: str, B: int, T: int, warmup: int, steps: int, max_seconds: float) -> dict:
    import torch

    torch.manual_seed(0)
    t0 = time.perf_counter()
    model = gpt2_model(impl)
    init_s = time.perf_counter() - t0
    n_params = sum(p.numel() for p in model.parameters())
    fn = model
    if impl == "compile":
        # one dynamic-shape graph: the three (B, T) cases can share the inductor cache
        fn = torch.compile(model, dynamic=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    g = torch.Generator().manual_seed(2)
    idx = torch.randint(0, 50304, (B, T), generator=g)
    targets = torch.randint(0, 50304, (B, T), generator=g)

    losses = []

    def step() -> dict:
        opt.zero_grad(set_to_none=True)
        clk = Clock()
        _, loss = fn(idx, targets)
        fwd = clk.lap()
        loss.backward()
        bwd = clk.lap()
        opt.step()
        out = {"forward": fwd, "backward": bwd, "optimizer": clk.lap()}
        losses.append(float(loss))
        return out

    first = step()
    for _ in range(max(0, warmup - 1)):
        step()
    reset_ok = reset_peak()
    base = _status_kb("VmRSS")
    steps_done: list[dict] = []
    t_start = time.perf_counter()
    while len(steps_done) < steps:
        steps_done.append(step())
        if len(steps_done) >= 2 and time.perf_counter() - t_start > max_seconds:
            break  # the time budget: at least two timed steps
    return {"status": "ok", "case": f"B{B},T{T}", "impl": impl, "B": B, "T": T,
            "params": n_params, "init_s": init_s,
            "first_step_s": sum(v[0] for v in first.values()),
            "first_loss": losses[0], "last_loss": losses[-1],
            **_timings(steps_done, ("forward", "backward", "optimizer"),
                       {"fwd_bwd": ("forward", "backward"),
                        "step": ("forward", "backward", "optimizer")}),
            **memory(reset_ok, base)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["component", "gpt2"])
    ap.add_argument("args", nargs="+")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--min-seconds", type=float, default=1.0)
    ap.add_argument("--max-seconds", type=float, default=math.inf)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    if a.threads > 0:  # before torch (and its OpenMP / MKL runtimes) load
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(a.threads)
        import torch

        torch.set_num_threads(a.threads)
    try:
        if a.what == "component":
            name, impl = a.args
            out = run_component(name, impl, a.warmup, a.steps, a.min_seconds)
        else:
            impl, B, T = a.args
            out = run_gpt2(impl, int(B), int(T), a.warmup, a.steps, a.max_seconds)
    except Unavailable as e:
        out = {"status": "unavailable", "reason": str(e)}
    except Exception as e:  # noqa: BLE001 - reported as a row
        tb = traceback.format_exc().strip().splitlines()
        out = {"status": "error", "error": f"{type(e).__name__}: {e}"[:1500],
               "where": " | ".join(tb[-6:])[:1500]}
    out.setdefault("pid", os.getpid())
    try:
        import torch

        out["threads"] = torch.get_num_threads()
    except ImportError:
        pass
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
