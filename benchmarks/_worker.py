"""One benchmark case in a process of its own, driven step by step (benchlib.run_interleaved).

    python benchmarks/_worker.py [--threads N] component <name> <impl>
    python benchmarks/_worker.py [--threads N] gpt2 <impl> [<model>] <B> <T>   (model: demo |
                                 shakespeare | gpt2, reference_models.MODELS; default gpt2)
    python benchmarks/_worker.py [--threads N] higher <layernorm|gelu> <small|gpt2> <impl>
                                 (bench_higher.HigherCase: a JVP and an HVP; impl torchclad | eager)
    python benchmarks/_worker.py [--threads N] --once [--steps N] component gelu torchclad   (by hand)

component: matmul | attention | layernorm | gelu | crossentropy;  impl: torchclad | eager | compile
gpt2 impl: torchclad | torchclad_fused | torchclad_fused_mkl (fused, its GEMMs MKL's whatever
           the CPU: TORCHCLAD_BLAS=mkl) | eager | compile | gemm_floor (its sgemms alone)

The driver starts one worker per implementation of a case and keeps them all alive, so their
steps can be interleaved round by round (the same machine load for each) while each keeps its own
peak RSS. Protocol: the worker sets the case up and prints one JSON line,
``{"status": "ready", ...}`` (or ``"unavailable"`` with a reason: a torchclad module not written
yet; or ``"error"``); then reads commands on stdin, one per line, answering each with one JSON line:

``warmup K``   K steps, untimed; answers the first one's wall time (compilation for compile)
``reset``      reset the RSS high-water mark (``/proc/self/clear_refs``); answers the RSS then
``step [K]``   K timed steps (default 1); answers the mean per step, ``{phase: [wall_s, cpu_s]}``
               (cpu = process CPU time, user + sys)
``finish``     answers memory figures and case facts (losses), then exits

A component step is ``module(x)`` and backward with a fixed grad_output (the loss itself for
cross-entropy), with the input requiring grad; a GPT-2 step is forward with targets,
``loss.backward()`` and ``AdamW.step()``, each phase timed apart. ``--threads N`` (default 1; 0 =
torch's default) sets OMP_NUM_THREADS / MKL_NUM_THREADS before torch loads.

Memory in the ``finish`` answer: ``rss_peak_mb`` (ru_maxrss: torch import, setup, compilation and
the steps), ``rss_base_mb`` (resident at ``reset``), ``rss_step_peak_mb`` (VmHWM since ``reset``:
the timed steps' high-water mark); ``minflt_per_step``: the minor page faults of the process
per timed step since ``reset`` (fresh pages the allocator got from the kernel: glibc returns
freed memory at the top of its heap once it exceeds its trim threshold, so whether a step
faults can depend on the process's allocation history more than on the code).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


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


def _status_kb(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


class Clock:
    """Phases of one step by the wall clock and the process CPU clock."""

    def __init__(self) -> None:
        self.w, self.c = time.perf_counter(), time.process_time()

    def lap(self) -> list[float]:
        w, c = time.perf_counter(), time.process_time()
        out = [w - self.w, c - self.c]
        self.w, self.c = w, c
        return out


# ---- cases


SIZES = {"B": 4, "T": 64, "C": 768, "NH": 12, "V": 50304}


class _BoundTargets:
    """loss_fn(x, targets) as a one-argument callable."""

    def __init__(self, loss_fn, targets) -> None:
        self.loss_fn, self.targets = loss_fn, targets

    def __call__(self, x):
        return self.loss_fn(x, self.targets)


class ComponentCase:
    def __init__(self, name: str, impl: str) -> None:
        import torch

        import reference_models as ref

        torch.manual_seed(0)
        B, T, C, NH, V = (SIZES[k] for k in ("B", "T", "C", "NH", "V"))
        cfg = ref.Config(block_size=T, n_head=NH, n_embd=C)
        g = torch.Generator().manual_seed(0)
        randn = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
        tc = impl == "torchclad"
        if impl not in ("torchclad", "eager", "compile"):
            raise SystemExit(f"unknown impl {impl!r}")
        if name == "matmul":
            mod = (_torchclad_nn("Linear").Linear if tc else torch.nn.Linear)(C, C)
            x, self.size = randn(B, T, C), f"B{B},T{T},C{C},OC{C}"
        elif name == "attention":
            mod = (_torchclad_nn("CausalSelfAttention").CausalSelfAttention(cfg) if tc
                   else ref.SelfAttention(cfg))
            x, self.size = randn(B, T, C), f"B{B},T{T},C{C},NH{NH}"
        elif name == "layernorm":
            mod = (_torchclad_nn("LayerNorm").LayerNorm if tc else torch.nn.LayerNorm)(C)
            x, self.size = randn(B, T, C), f"B{B},T{T},C{C}"
        elif name == "gelu":
            mod = (_torchclad_nn("GELU").GELU if tc else torch.nn.GELU)(approximate="tanh")
            x, self.size = randn(B, T, 4 * C), f"N={B}*{T}*{4 * C}"
        elif name == "crossentropy":
            mod = (_torchclad_nn("CrossEntropyLoss").CrossEntropyLoss if tc
                   else torch.nn.CrossEntropyLoss)()
            x, self.size = randn(B * T, V), f"B{B},T{T},V{V}"
            self.targets = torch.randint(0, V, (B * T,), generator=g)
        else:
            raise SystemExit(f"unknown component {name!r}")
        # identical parameters for every impl: drawn from one seed, in name order
        with torch.no_grad():
            pg = torch.Generator().manual_seed(1)
            for pname, p in sorted(mod.named_parameters()):
                p.copy_(torch.randn(p.shape, generator=pg) * (0.02 if p.dim() > 1 else 0.1)
                        + (1.0 if pname.endswith("weight") and p.dim() == 1 else 0.0))
        self.params = list(mod.parameters())
        call = _BoundTargets(mod, self.targets) if name == "crossentropy" else mod
        self.fn = torch.compile(call if name != "crossentropy" else call.__call__) \
            if impl == "compile" else call
        self.x = x.requires_grad_(True)
        self.gout = None if name == "crossentropy" else randn(*x.shape)

    def step(self) -> dict:
        self.x.grad = None
        for p in self.params:
            p.grad = None
        clk = Clock()
        y = self.fn(self.x)
        fwd = clk.lap()
        y.backward() if self.gout is None else y.backward(self.gout)
        return {"forward": fwd, "backward": clk.lap()}

    def facts(self) -> dict:
        return {"size": self.size}


class GPT2Case:
    def __init__(self, impl: str, model_name: str, B: int, T: int) -> None:
        import torch

        import reference_models as ref

        torch.manual_seed(0)
        t0 = time.perf_counter()
        cfg = ref.MODELS[model_name][0]
        self.vocab = cfg["vocab_size"]
        if impl in ("torchclad", "torchclad_fused", "torchclad_fused_mkl"):
            tnn = _torchclad_nn("GPT2", "GPT2Config")
            model = tnn.GPT2(tnn.GPT2Config(**cfg), fused=impl != "torchclad")
        elif impl in ("eager", "compile"):
            model = ref.GPT2(ref.Config(**cfg))
        else:
            raise SystemExit(f"unknown impl {impl!r}")
        # the same weights for every impl, copied by name (nanoGPT / llm.c names in both);
        # the vectors keep their GPT-2 initialisation (ones and zeros)
        with torch.no_grad():
            pg = torch.Generator().manual_seed(1)
            for _, p in sorted(model.named_parameters()):
                if p.dim() > 1:
                    p.copy_(torch.randn(p.shape, generator=pg) * 0.02)
        self.init_s = time.perf_counter() - t0
        self.params = sum(p.numel() for p in model.parameters())
        # compile: one dynamic-shape graph, so the three (B, T) cases can share the inductor cache
        self.fn = torch.compile(model, dynamic=True) if impl == "compile" else model
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
        g = torch.Generator().manual_seed(2)
        self.idx = torch.randint(0, self.vocab, (B, T), generator=g)
        self.targets = torch.randint(0, self.vocab, (B, T), generator=g)
        self.losses: list[float] = []

    def step(self) -> dict:
        self.opt.zero_grad(set_to_none=True)
        clk = Clock()
        _, loss = self.fn(self.idx, self.targets)
        fwd = clk.lap()
        loss.backward()
        bwd = clk.lap()
        self.opt.step()
        out = {"forward": fwd, "backward": bwd, "optimizer": clk.lap()}
        self.losses.append(float(loss))
        return out

    def facts(self) -> dict:
        return {"params": self.params, "init_s": self.init_s, "first_loss": self.losses[0],
                "last_loss": self.losses[-1]}


class GemmFloorCase:
    """The GEMM floor as a case (bench_gpt2.GemmReplay): forward = the forward sgemms,
    backward = the d-input and d-weight ones; nothing else."""

    def __init__(self, model_name: str, B: int, T: int) -> None:
        from bench_gpt2 import GemmReplay

        self.replay = GemmReplay(model_name, B, T)

    def step(self) -> dict:
        clk = Clock()
        self.replay.forward()
        fwd = clk.lap()
        self.replay.backward()
        return {"forward": fwd, "backward": clk.lap(), "optimizer": clk.lap()}

    def facts(self) -> dict:
        return {"gflop": self.replay.gflop}


# ---- server


_PROTO = None  # the protocol stream: the original stdout (fd 1 itself is sent to stderr)


def _reply(obj: dict) -> None:
    out = _PROTO or sys.stdout
    out.write(json.dumps(obj) + "\n")
    out.flush()


def serve(case) -> None:
    import torch

    base_kb = None
    faults0, steps = None, 0
    for line in sys.stdin:
        cmd, *arg = line.split()
        if cmd == "step":
            k = int(arg[0]) if arg else 1
            runs = [case.step() for _ in range(k)]
            steps += k
            _reply({p: [sum(r[p][0] for r in runs) / k, sum(r[p][1] for r in runs) / k]
                    for p in runs[0]})
        elif cmd == "warmup":
            t0 = time.perf_counter()
            case.step()
            first = time.perf_counter() - t0
            for _ in range(int(arg[0]) - 1 if arg else 0):
                case.step()
            _reply({"first_call_s": first})
        elif cmd == "reset":
            try:
                Path("/proc/self/clear_refs").write_text("5")
                base_kb = _status_kb("VmRSS")
            except OSError:
                base_kb = None
            faults0, steps = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, 0
            _reply({"rss_mb": (base_kb or 0) / 1024})
        elif cmd == "finish":
            out = {"rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                   "threads": torch.get_num_threads(), **case.facts()}
            if faults0 is not None and steps:
                faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0
                out["minflt_per_step"] = faults / steps
            if base_kb is not None:
                out["rss_base_mb"] = base_kb / 1024
                out["rss_step_peak_mb"] = (_status_kb("VmHWM") or 0) / 1024
            _reply(out)
            return
        else:
            _reply({"status": "error", "error": f"unknown command {cmd!r}"})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--once", action="store_true", help="run warmup + steps and print (by hand)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("what", choices=["component", "gpt2", "higher"])
    ap.add_argument("args", nargs="+")
    a = ap.parse_args(argv)
    if a.threads > 0:  # before torch (and its OpenMP / MKL runtimes) load
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(a.threads)
    if a.what == "gpt2" and a.args[0].endswith("_mkl"):  # before torchclad chooses its BLAS
        os.environ["TORCHCLAD_BLAS"] = "mkl"
        os.environ.pop("TORCHCLAD_SGEMM_LIB", None)
    # the protocol gets the original stdout; anything else written to fd 1 (by Python or C++:
    # compiler chatter, warnings) goes to stderr
    global _PROTO
    sys.stdout.flush()
    _PROTO = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    try:
        import torch

        if a.threads > 0:
            torch.set_num_threads(a.threads)
        if a.what == "component":
            case = ComponentCase(*a.args)
        elif a.what == "higher":
            from bench_higher import HigherCase

            case = HigherCase(*a.args)
        else:
            impl, model, B, T = a.args if len(a.args) == 4 else (a.args[0], "gpt2", *a.args[1:])
            if impl == "gemm_floor":
                case = GemmFloorCase(model, int(B), int(T))
            else:
                case = GPT2Case(impl, model, int(B), int(T))
    except Unavailable as e:
        _reply({"status": "unavailable", "reason": str(e)})
        return 0
    except Exception as e:  # noqa: BLE001 - reported as a row
        tb = traceback.format_exc().strip().splitlines()
        _reply({"status": "error", "error": f"{type(e).__name__}: {e}"[:1500],
                "where": " | ".join(tb[-6:])[:1500]})
        return 0
    if a.once:
        case.step()
        for _ in range(a.steps):
            _reply(case.step())
        _reply(case.facts())
        return 0
    _reply({"status": "ready", "pid": os.getpid()})
    try:
        serve(case)
    except Exception as e:  # noqa: BLE001 - a failed step: report it and end the worker
        tb = traceback.format_exc().strip().splitlines()
        _reply({"status": "error", "error": f"{type(e).__name__}: {e}"[:1500],
                "where": " | ".join(tb[-6:])[:1500]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
