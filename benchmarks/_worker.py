"""One benchmark case in a fresh process (run by bench_components.py / bench_gpt2.py through
benchlib.run_worker), so that its peak RSS is its own.

    python benchmarks/_worker.py component <name> <impl> [--warmup N] [--steps N] [--min-seconds S]
    python benchmarks/_worker.py gpt2 <impl> <B> <T> [--warmup N] [--steps N] [--max-seconds S]

component: matmul | attention | layernorm | gelu | crossentropy;  impl: torchclad | eager | compile
gpt2 impl: torchclad | torchclad_fused | eager | compile

Prints one JSON line: status ("ok", "unavailable" with a reason, or "error"), per-phase time
samples (seconds), the first call's time (for compile: compilation included), and memory:

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
    grad_out = None if name == "crossentropy" else randn(*_out_shape(name, x))
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


def _out_shape(name: str, x):
    return tuple(x.shape)


def run_component(name: str, impl: str, warmup: int, steps: int, min_seconds: float) -> dict:
    import torch

    torch.manual_seed(0)
    mod, x, gout, label = component(name, impl)
    fn = mod
    if impl == "compile":
        fn = torch.compile(mod if isinstance(mod, torch.nn.Module) else mod.__call__)
    params = list(mod.parameters())

    def step():
        x.grad = None
        for p in params:
            p.grad = None
        t0 = time.perf_counter()
        y = fn(x)
        t1 = time.perf_counter()
        if gout is None:
            y.backward()
        else:
            y.backward(gout)
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1

    first = step()
    for _ in range(max(0, warmup - 1)):
        step()
    reset_ok = reset_peak()
    base = _status_kb("VmRSS")
    fwd, bwd = [], []
    t_start = time.perf_counter()
    while len(fwd) < steps or (time.perf_counter() - t_start < min_seconds and len(fwd) < 50 * steps):
        f, b = step()
        fwd.append(f)
        bwd.append(b)
    return {"status": "ok", "case": name, "impl": impl, "size": label,
            "first_call_s": sum(first), "times": {"forward": fwd, "backward": bwd,
                                                  "fwd_bwd": [f + b for f, b in zip(fwd, bwd)]},
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

    def step():
        opt.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        _, loss = fn(idx, targets)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        losses.append(float(loss))
        return t1 - t0, t2 - t1, t3 - t2

    first = step()
    for _ in range(max(0, warmup - 1)):
        step()
    reset_ok = reset_peak()
    base = _status_kb("VmRSS")
    fwd, bwd, optim = [], [], []
    t_start = time.perf_counter()
    while len(fwd) < steps:
        f, b, o = step()
        fwd.append(f)
        bwd.append(b)
        optim.append(o)
        if len(fwd) >= 2 and time.perf_counter() - t_start > max_seconds:
            break  # the time budget: at least two timed steps
    return {"status": "ok", "case": f"B{B},T{T}", "impl": impl, "B": B, "T": T,
            "params": n_params, "init_s": init_s, "first_step_s": sum(first),
            "first_loss": losses[0], "last_loss": losses[-1],
            "times": {"forward": fwd, "backward": bwd, "optimizer": optim,
                      "fwd_bwd": [f + b for f, b in zip(fwd, bwd)],
                      "step": [f + b + o for f, b, o in zip(fwd, bwd, optim)]},
            **memory(reset_ok, base)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["component", "gpt2"])
    ap.add_argument("args", nargs="+")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--min-seconds", type=float, default=1.0)
    ap.add_argument("--max-seconds", type=float, default=math.inf)
    a = ap.parse_args(argv)
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
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
