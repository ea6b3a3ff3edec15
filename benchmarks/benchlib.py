"""Shared helpers of the benchmark suite (benchmarks/bench_*.py): statistics, machine info,
the results file, fresh-process case runs.

``benchmarks/results.json`` holds one object::

    {"machine": {...}, "updated": "<iso date>", "sections": {"<section>": {...}, ...}}

Each benchmark module writes its own section with :func:`update_section` (read, replace the
section, write atomically), which then re-renders ``results.md`` and ``results.png``
(:mod:`render`). Sections of other modules are kept, so a partial run updates only what it ran;
every section carries its own ``machine`` block and date.

Timing conventions, for every module: warm-up calls first, then repeated timed calls; a case
reports ``min``, ``median``, ``p10``/``p90`` and the sample count; ratios are taken between the
``min`` of two cases measured in the same run (the machine is shared: the minimum is the
measurement least disturbed by other load). No timing is ever asserted.
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
from pathlib import Path
from typing import Any, Sequence

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS_JSON = HERE / "results.json"
RESULTS_MD = HERE / "results.md"
RESULTS_PNG = HERE / "results.png"

# the package's compiler flags (torchclad/build/compiler.py), used for the benchmark programs
PACKAGE_CXXFLAGS = ("-O3", "-std=c++17", "-fno-fast-math", "-fopenmp")


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


def ratio(a: dict[str, float] | None, b: dict[str, float] | None, key: str = "min") -> float | None:
    if not a or not b or not a.get(key) or not b.get(key):
        return None
    return a[key] / b[key]


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


def load_results(path: Path = RESULTS_JSON) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
        if isinstance(data, dict) and isinstance(data.get("sections"), dict):
            return data
    except (OSError, ValueError):
        pass
    return {"sections": {}}


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def update_section(name: str, payload: dict[str, Any], path: Path = RESULTS_JSON,
                   render: bool = True) -> dict[str, Any]:
    """Store ``payload`` as section ``name`` of the results file; re-render md and png."""
    data = load_results(path)
    data["sections"][name] = payload
    data["machine"] = payload.get("machine") or data.get("machine") or machine_info()
    data["updated"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    _atomic_write(path, json.dumps(data, indent=1, sort_keys=False) + "\n")
    if render and path == RESULTS_JSON:
        import render as _render  # benchmarks/render.py (benchmarks/ is on sys.path)

        _render.render_all(data)
    return data


def merged(section: str, payload: dict[str, Any], key: Sequence[str],
           order: Sequence[str] | None = None, order_field: str | None = None) -> dict[str, Any]:
    """``payload`` with the rows of the stored section that it did not re-run (a partial run,
    e.g. ``--cases gelu``, keeps the other cases' last numbers; each row keeps its own date in
    its section's machine block only, so a merged section says so in ``merged_from``)."""
    old = load_results().get("sections", {}).get(section)
    if not old:
        return payload
    k = lambda r: tuple(r.get(f) for f in key)  # noqa: E731
    mine = {k(r) for r in payload["rows"]}
    kept = [r for r in old.get("rows", []) if k(r) not in mine]
    if not kept:
        return payload
    out = dict(payload)
    out["rows"] = kept + payload["rows"]
    out["merged_from"] = (old.get("machine") or {}).get("date")
    if order_field:
        have = set(old.get(order_field, [])) | set(payload.get(order_field, []))
        out[order_field] = [c for c in (order or sorted(have)) if c in have]
    return out


def run_worker(args: Sequence[str], timeout: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``python benchmarks/_worker.py <args>`` in a fresh process; its last stdout line is a
    JSON object. A failure becomes ``{"status": "error", "error": ...}`` (never an exception)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    cmd = [sys.executable, str(HERE / "_worker.py"), *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env,
                              cwd=str(ROOT))
    except subprocess.TimeoutExpired:
        return {"status": "error", "error": f"timed out after {timeout:.0f} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-12:]
        return {"status": "error", "error": f"exit {proc.returncode}: " + " | ".join(tail)}
    return json.loads(lines[-1])


def bench_threads() -> int:
    """Threads for the PyTorch benchmarks: $TORCHCLAD_BENCH_THREADS, default 1 (0 = torch's
    default). One thread by default because the benchmark machine is a shared 2-core box: with
    more runnable processes than cores, torch's OpenMP regions wait for descheduled threads
    (measured: GPT-2 (1, 16) fwd+bwd 4.7 s with 2 threads vs 1.3 s with 1 under load 7), and
    torchclad's generated kernels are single-threaded anyway -- so the comparison is per core."""
    try:
        return max(0, int(os.environ.get("TORCHCLAD_BENCH_THREADS", "1")))
    except ValueError:
        return 1


def summarize_worker(out: dict[str, Any]) -> dict[str, Any]:
    """Turn a worker's sample lists into statistics. The primary clock (``times``) is the
    process CPU time when the case ran on one thread (the time it was descheduled does not
    count), else the wall clock; both are kept (``wall_times``, ``cpu_times``)."""
    if out.get("status") != "ok":
        return out
    wall = {k: stats(v) for k, v in out.pop("times").items()}
    cpu = {k: stats(v) for k, v in out.pop("cpu_times", {}).items()}
    one = out.get("threads") == 1 and cpu
    out["clock"] = "process_cpu" if one else "wall"
    out["times"] = cpu if one else wall
    out["wall_times"], out["cpu_times"] = wall, cpu
    return out


def cxx() -> list[str]:
    return (os.environ.get("CXX") or "g++").split()


def have_cxx() -> bool:
    return shutil.which(cxx()[0]) is not None


def fmt_ms(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    ms = seconds * 1e3
    return f"{ms:.3f}" if ms < 1 else f"{ms:.2f}" if ms < 100 else f"{ms:.0f}"


def fmt_x(r: float | None) -> str:
    return "–" if r is None else f"{r:.2f}×"
