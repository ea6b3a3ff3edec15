"""Shared helpers of the benchmark suite (benchmarks/bench_*.py): statistics, machine info,
the results file, fresh-process case runs.

``benchmarks/results.json`` holds one object::

    {"machine": {...}, "updated": "<iso date>", "sections": {"<section>": {...}, ...}}

Each benchmark module writes its own section with :func:`update_section` (read, replace the
section, write atomically), which then re-renders ``results.md`` and ``results.png``
(:mod:`render`). Sections of other modules are kept, so a partial run updates only what it ran;
every section carries its own ``machine`` block and date.

Timing conventions, for every module: warm-up calls first, then repeated timed calls; a case
reports ``min``, ``median``, ``p10``/``p90`` and the sample count. Implementations compared with each other are
measured in the same run, interleaved (:func:`run_interleaved`; the C++ programs interleave
internally); the machine is shared, so everything runs on one thread and is timed by CPU time.
No timing is ever asserted.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from results import (  # noqa: F401 - re-exported for the bench_*.py modules
    HERE, RESULTS_JSON, SCHEMA, atomic_write, fmt_ms, fmt_x, load_results)

ROOT = HERE.parent

# the package's compiler flags (torchclad/toolchain/compiler.py), used for the benchmark programs
PACKAGE_CXXFLAGS = ("-O3", "-std=c++17", "-fno-fast-math", "-fopenmp")


def kernel_build_flags() -> tuple[list[str], list[str], str]:
    """``(cxxflags, libraries, label)`` of the built-in kernels as installed and as they run on
    this CPU: the package flags, plus what setup.py adds for them (torchclad/toolchain/isa.py: the
    libmvec declarations when the install generated them, the alias-check limit, and the
    CPU-specific build the loader picks here). The C++ benchmarks compile their programs with
    these, so that they time the code the modules run."""
    flags, libs = list(PACKAGE_CXXFLAGS), []
    label = " ".join(PACKAGE_CXXFLAGS)
    try:
        sys.path.insert(0, str(ROOT))
        from torchclad.toolchain import isa
    except ImportError:
        return flags, libs, label
    header = ROOT / "torchclad" / "_generated" / "torchclad_vecmath.h"
    if header.is_file() and "TORCHCLAD_VECMATH_SIMD" in header.read_text().split("extern", 1)[-1]:
        flags += [*isa.VECMATH_CFLAGS, "-include", str(header)]
        libs += list(isa.VECMATH_LIBS)
        label += " " + " ".join(isa.VECMATH_CFLAGS) + " -include torchclad_vecmath.h (libmvec)"
    flags += list(isa.KERNEL_CFLAGS)
    label += " " + " ".join(isa.KERNEL_CFLAGS)
    built = [v for v in isa.VARIANTS
             if any((ROOT / "torchclad").glob(f"_C_{v}.*"))]
    best = isa.select(built)[0]
    if best != "default":
        flags += list(isa.VARIANTS[best])
        label += " " + " ".join(isa.VARIANTS[best])
    return flags, libs, label


def stats(samples: Sequence[float]) -> dict[str, float]:
    """min / median / p10 / p90 / mean of ``samples`` (seconds), and their count."""
    s = sorted(float(x) for x in samples)
    if not s:
        return {"n": 0}

    def q(p: float) -> float:  # nearest-rank percentile
        return s[min(len(s) - 1, max(0, round(p * (len(s) - 1))))]

    return {"n": len(s), "min": s[0], "median": statistics.median(s), "p10": q(0.1),
            "p90": q(0.9), "mean": statistics.fmean(s)}


def spread(st: dict[str, float]) -> float | None:
    """(p90 - min) / min: how far the slower tenth of the samples strayed from the best."""
    if not st.get("n") or not st.get("min"):
        return None
    return (st["p90"] - st["min"]) / st["min"]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "") if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def _compiler_version() -> str:
    cxx = os.environ.get("CXX", "g++").split()[0]
    try:
        return subprocess.run([cxx, "--version"], capture_output=True, text=True,
                              timeout=30).stdout.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def machine_info(with_torch: bool = True) -> dict[str, Any]:
    """What the numbers were measured on (and under how much other load)."""
    info: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "loadavg_at_start": list(os.getloadavg()),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "compiler": _compiler_version(),
        "git": _git_commit(),
    }
    try:
        info["memory_gb"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        pass
    if with_torch:
        try:
            import torch

            info["torch"] = torch.__version__
            info["torch_threads"] = torch.get_num_threads()
        except ImportError:
            info["torch"] = None
    return info


def update_section(name: str, payload: dict[str, Any], path: Path = RESULTS_JSON,
                   render: bool = True) -> dict[str, Any]:
    """Store ``payload`` as section ``name`` of the results file; re-render md and png."""
    data = load_results(path)
    payload.setdefault("schema", SCHEMA)
    data["sections"][name] = payload
    data["machine"] = payload.get("machine") or data.get("machine") or machine_info()
    data["updated"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    atomic_write(path, json.dumps(data, indent=1, sort_keys=False) + "\n")
    if render and path == RESULTS_JSON:
        import render as _render  # benchmarks/render.py (it imports results, not benchlib)

        try:
            _render.render_all(data)
        except Exception as e:  # noqa: BLE001 - the numbers are saved; say why the table is not
            print(f"benchmarks: results.json updated, but rendering results.md failed: "
                  f"{type(e).__name__}: {e}", file=sys.stderr)
    return data


def merged(section: str, payload: dict[str, Any], key: Sequence[str],
           order: Sequence[str] | None = None, order_field: str | None = None) -> dict[str, Any]:
    """``payload`` with the rows of the stored section that it did not re-run (a partial run,
    e.g. ``--cases gelu``, keeps the other cases' last numbers; each row keeps its own date in
    its section's machine block only, so a merged section says so in ``merged_from``). A
    stored row without every ``key`` field is from an older layout of the section: dropped."""
    old = load_results().get("sections", {}).get(section)
    if not old:
        return payload
    k = lambda r: tuple(r.get(f) for f in key)  # noqa: E731
    mine = {k(r) for r in payload["rows"]}
    kept = [r for r in old.get("rows", []) if k(r) not in mine and all(f in r for f in key)]
    if not kept:
        return payload
    out = dict(payload)
    out["rows"] = kept + payload["rows"]
    out["merged_from"] = (old.get("machine") or {}).get("date")
    if order_field:
        have = set(old.get(order_field, [])) | set(payload.get(order_field, []))
        out[order_field] = [c for c in (order or sorted(have)) if c in have]
    return out


def _mem_available_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 2**20
    except (OSError, ValueError):
        pass
    return None


class _Worker:
    """One ``benchmarks/_worker.py`` process: a case set up and waiting for commands."""

    def __init__(self, impl: str, args: Sequence[str], threads: int, log_dir: Path) -> None:
        self.impl = impl
        self.log = log_dir / f"{impl}.stderr"
        self.err = open(self.log, "w")
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "_worker.py"), "--threads", str(threads), *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True,
            bufsize=1, cwd=str(ROOT))
        self.row: dict[str, Any] = {"impl": impl}

    def ask(self, cmd: str | None, timeout: float) -> dict[str, Any]:
        """Send ``cmd`` (None: just read) and wait for the one-line answer."""
        import threading

        if cmd is not None:
            self.proc.stdin.write(cmd + "\n")
            self.proc.stdin.flush()
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(timeout)
        if reader.is_alive():
            self.kill()
            raise RuntimeError(f"no answer to {cmd or 'setup'!r} within {timeout:.0f} s")
        if not box or not box[0].strip():
            self.proc.wait(timeout=30)
            raise RuntimeError(f"worker exited ({self.proc.returncode}): {self.stderr_tail()}")
        ans = json.loads(box[0])
        if ans.get("status") == "error":
            raise RuntimeError(ans.get("error", "?") + (f" [{ans['where']}]" if ans.get("where") else ""))
        return ans

    def stderr_tail(self) -> str:
        self.err.flush()
        try:
            return " | ".join(self.log.read_text().strip().splitlines()[-8:])[-1500:]
        except OSError:
            return ""

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()  # our own child, by its handle
            self.proc.wait()

    def close(self) -> None:
        self.kill()
        self.err.close()


def run_interleaved(cases: dict[str, Sequence[str]], *, warmup: dict[str, int], rounds: int,
                    min_seconds: float, max_seconds: float, threads: int,
                    setup_timeout: float = 900, step_timeout: float = 900,
                    mem_per_worker_gb: float | dict[str, float] = 0.5,
                    min_step_seconds: float = 0.0) -> dict[str, dict[str, Any]]:
    """Run the implementations of one case side by side, one process each (``_worker.py``).

    ``cases`` maps impl -> worker arguments. All workers are set up and warmed up first (one
    after the other), then ``rounds`` rounds (more while the total is under ``min_seconds``,
    fewer -- at least 2 -- once ``max_seconds`` are spent) each run one timed step of every
    impl, the order rotating from round to round; so every impl's i-th step ran under about the
    same machine load as the others' i-th, and :func:`paired` can compare them round by round.
    A "step" of a fast case is K back-to-back steps (their mean), K chosen per impl after the
    warm-up so that it lasts about ``min_step_seconds``.
    If the machine lacks the memory for all workers at once (``mem_per_worker_gb``: GB per
    worker, or per impl), they run one at a time (``paired`` is then False). Returns impl ->
    row: status, samples per phase (lists of ``[wall, cpu]``), first-call time, memory and case
    facts; a worker that is unavailable or fails is a row with its reason, and the others go
    on.
    """
    impls = list(cases)
    avail = _mem_available_gb()
    mem = (mem_per_worker_gb if isinstance(mem_per_worker_gb, dict)
           else dict.fromkeys(impls, mem_per_worker_gb))
    together = avail is None or avail > sum(mem[i] for i in impls) + 2.0
    groups = [impls] if together else [[i] for i in impls]
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="torchclad_bench_logs_") as logs:
        for group in groups:
            rows.update(_run_group(group, cases, warmup, rounds, min_seconds, max_seconds,
                                   threads, Path(logs), setup_timeout, step_timeout,
                                   min_step_seconds))
    for r in rows.values():
        r["paired"] = together and len(impls) > 1
    return rows


def _run_group(impls, cases, warmup, rounds, min_seconds, max_seconds, threads, logs,
               setup_timeout, step_timeout, min_step_seconds) -> dict[str, dict[str, Any]]:
    workers: dict[str, _Worker] = {}
    rows: dict[str, dict[str, Any]] = {}

    def fail(impl: str, e: Exception) -> None:
        w = workers.pop(impl)
        rows[impl] = {"impl": impl, "status": "error", "error": str(e)[-1500:]}
        w.close()

    try:
        for impl in impls:  # set up one at a time (compilation, model init)
            w = _Worker(impl, cases[impl], threads, logs)
            workers[impl] = w
            try:
                ans = w.ask(None, setup_timeout)
                if ans.get("status") != "ready":
                    rows[impl] = {"impl": impl, **ans}
                    workers.pop(impl).close()
                    continue
                w.row.update(first_call_s=w.ask(f"warmup {warmup.get(impl, 1)}",
                                                setup_timeout)["first_call_s"])
                reps = 1
                if min_step_seconds > 0:  # calibrate K from one probe step
                    probe = w.ask("step", step_timeout)
                    once = sum(v[0] for v in probe.values())
                    reps = max(1, min(1000, int(min_step_seconds / max(once, 1e-6)) + 1))
                w.row["reps_per_step"] = reps
                w.ask("reset", step_timeout)
            except Exception as e:  # noqa: BLE001
                fail(impl, e)
        samples: dict[str, list[dict]] = {i: [] for i in workers}
        t0 = time.perf_counter()
        r = 0
        while workers:
            spent = time.perf_counter() - t0
            if r >= 2 and (spent > max_seconds or (r >= rounds and spent >= min_seconds)):
                break
            live = [i for i in impls if i in workers]
            k = r % len(live)
            for impl in live[k:] + live[:k]:
                try:
                    w = workers[impl]
                    samples[impl].append(w.ask(f"step {w.row['reps_per_step']}", step_timeout))
                except Exception as e:  # noqa: BLE001
                    fail(impl, e)
            r += 1
        for impl, w in list(workers.items()):
            try:
                facts = w.ask("finish", step_timeout)
            except Exception as e:  # noqa: BLE001
                fail(impl, e)
                continue
            rows[impl] = {**w.row, "status": "ok", "samples": samples[impl], **facts}
    finally:
        for w in workers.values():
            w.close()
    return rows


def paired(rows: dict[str, dict[str, Any]], impl: str, base: str, phase: str,
           clock: int) -> dict[str, float] | None:
    """Per-round ratios impl / base of ``phase`` (clock 0 wall, 1 CPU): median, p10, p90."""
    a, b = rows.get(impl), rows.get(base)
    if not a or not b or a.get("status") != "ok" or b.get("status") != "ok" or not a.get("paired"):
        return None
    pairs = [x[phase][clock] / y[phase][clock] for x, y in zip(a["samples"], b["samples"])
             if y[phase][clock] > 0]
    if not pairs:
        return None
    st = stats(pairs)
    return {"median": st["median"], "p10": st["p10"], "p90": st["p90"], "n": st["n"]}


def summarize_rows(rows: dict[str, dict[str, Any]], sums: dict[str, tuple[str, ...]],
                   base: str = "eager", also: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
    """Add summed phases (e.g. fwd_bwd) to the samples, statistics per phase and clock, and the
    paired ratios against ``base`` (``vs_<base>``) and against each impl of ``also``
    (``vs_<impl>``). The primary clock (``times``) is the process CPU time when the workers ran
    on one thread (time spent descheduled does not count), else the wall."""
    for row in rows.values():
        if row.get("status") != "ok":
            continue
        for st in row["samples"]:
            for name, parts in sums.items():
                st[name] = [sum(st[p][0] for p in parts), sum(st[p][1] for p in parts)]
    for row in rows.values():
        if row.get("status") != "ok":
            continue
        phases = list(row["samples"][0]) if row["samples"] else []
        clock = 1 if row.get("threads") == 1 else 0
        row["clock"] = "process_cpu" if clock else "wall"
        row["wall_times"] = {p: stats([s[p][0] for s in row["samples"]]) for p in phases}
        row["cpu_times"] = {p: stats([s[p][1] for s in row["samples"]]) for p in phases}
        row["times"] = row["cpu_times"] if clock else row["wall_times"]
        for b in (base, *also):
            row["vs_" + b] = {p: paired(rows, row["impl"], b, p, clock) for p in phases
                              } if row["impl"] != b else None
    for row in rows.values():
        row.pop("samples", None)
    return rows


def failure_text(row: dict[str, Any], width: int = 200) -> str | None:
    """A log line's text for a row that did not run ("error: <why>"), None for one that did."""
    if row.get("status") == "ok":
        return None
    return f"{row.get('status')}: {(row.get('reason') or row.get('error') or '')[:width]}"


def benchmark_once(benchmark: Any, run_all: Any, table: Any) -> dict[str, Any]:
    """pytest-benchmark entry point of a PyTorch benchmark module: one round of ``run_all``,
    ``table(payload)`` printed, each row's fwd+bwd minimum (or its status) kept as extra info."""
    payload = benchmark.pedantic(run_all, rounds=1, iterations=1)
    print("\n" + table(payload))
    for r in payload["rows"]:
        benchmark.extra_info[f"{r['case']}/{r['impl']}"] = (
            r["times"]["fwd_bwd"]["min"] if r.get("status") == "ok" else r.get("status"))
    return payload


def default_threads() -> int:
    """torch's default thread count in this machine (its cores), what a user runs with."""
    import torch

    return torch.get_num_threads()


def thread_tag(threads: int) -> str:
    """The thread count in a case label: `2thr` (0 = torch's default)."""
    return f"{threads or default_threads()}thr"


def compile_kernel_program(prog: Path, exe: Path, defines: dict, what: str,
                           libraries: Sequence[str] = ()) -> float:
    """Compile a benchmark program with the installed built-in kernels' flags (and this
    directory and the runtime headers on the include path), linked against ``libraries`` as
    the extension is (a kernel spec's ``libraries``: ``torch_cpu`` for the BLAS of the matmul
    custom derivative); the seconds it took."""
    from torchclad.toolchain.compiler import external_library

    flags, libs, _ = kernel_build_flags()
    ldflags = []
    for lib in libraries:
        where, name = external_library(lib)
        ldflags += [f"-L{where}", f"-l{name}", f"-Wl,-rpath,{where}"]
    cmd = [*cxx(), *flags, f"-I{HERE}", f"-I{ROOT / 'csrc' / 'runtime'}",
           *(f"-D{k}={v}" for k, v in defines.items()), str(prog), "-o", str(exe),
           *ldflags, *(f"-l{lib}" for lib in libs)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"compiling the {what} benchmark failed:\n{proc.stderr[-4000:]}")
    return time.perf_counter() - t0


def cxx() -> list[str]:
    return (os.environ.get("CXX") or "g++").split()


def have_cxx() -> bool:
    return shutil.which(cxx()[0]) is not None
