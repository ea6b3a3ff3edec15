"""Tape runtime benchmarks (csrc/runtime/torchclad/tape.h).

Compiles benchmarks/tape/bench_tape.cpp with g++ -O2 and prints tables of

* push/pop throughput of torchclad::Tape vs a std::vector doubling tape
  (8-byte cells, push_back/pop_back) for 1e7 doubles, fresh and reused tape;
* short tapes created per call (8 values: the inline buffer vs the vector);
* peak RSS of one push/pop cycle without and with TORCHCLAD_TAPE_MEMORY_LIMIT,
  and the offload throughput (MB/s of pushes while spilling, of pops while
  reading back).

Run either way (no timing assertions):

    python benchmarks/bench_tape.py [--n 10000000] [--limit 16M]
    pytest benchmarks/bench_tape.py --benchmark-only -s
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SRC = HERE / "tape" / "bench_tape.cpp"
INCLUDE = ROOT / "csrc" / "runtime"
CXX = os.environ.get("CXX", "g++")


def build(out_dir: Path) -> Path:
    exe = out_dir / "bench_tape"
    cmd = [CXX, "-O2", "-std=c++17", f"-I{INCLUDE}", "-pthread", str(SRC), "-o", str(exe)]
    subprocess.run(cmd, check=True)
    return exe


def run(exe: Path, *args: str, env: dict | None = None) -> list[dict[str, str]]:
    full_env = dict(os.environ)
    full_env.pop("TORCHCLAD_TAPE_MEMORY_LIMIT", None)
    full_env.update(env or {})
    out = subprocess.run([str(exe), *args], check=True, capture_output=True, text=True,
                         env=full_env).stdout
    rows = []
    for line in out.splitlines():
        kind, _, rest = line.partition(" ")
        row = dict(re.findall(r"(\w+)=(\S+)", rest))
        row["kind"] = kind
        rows.append(row)
    return rows


def table(title: str, header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join([title, line(header), line(["-" * w for w in widths]), *map(line, rows)])


def run_all(n: int = 10_000_000, limit: str = "16M", reps: int = 5) -> tuple[str, dict]:
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench_tape_") as tmp:
        tmp = Path(tmp)
        exe = build(tmp)
        spill_tmp = tmp / "spill"
        spill_tmp.mkdir()

        tp = run(exe, "throughput", str(n), str(reps))
        small = run(exe, "small", "2000000")
        rss = [
            ("vector", run(exe, "rss", str(n), "vector")[0]),
            ("tape", run(exe, "rss", str(n), "tape")[0]),
            (f"tape, limit {limit}",
             run(exe, "rss", str(n), "tape",
                 env={"TORCHCLAD_TAPE_MEMORY_LIMIT": limit, "TMPDIR": str(spill_tmp)})[0]),
        ]
        leftovers = list(spill_tmp.iterdir())

    out = []
    by = {r["impl"]: r for r in tp}
    out.append(table(
        f"push/pop throughput, {n:.0e} doubles (ns per value, best of {reps})",
        ["impl", "push", "pop", "push (reused)", "pop (reused)", "ok"],
        [[k, by[k]["push_ns"], by[k]["pop_ns"], by[k]["warm_push_ns"], by[k]["warm_pop_ns"],
          by[k]["ok"]] for k in ("tape", "vector")],
    ))
    out.append(table(
        "short tape per call (construct, 8 push, 8 pop, destroy)",
        ["impl", "ns/call"],
        [[r["impl"], r["ns_per_call"]] for r in small],
    ))
    out.append(table(
        f"one push/pop cycle of {n:.0e} doubles ({n * 8 / 1e6:.0f} MB), each in a fresh process",
        ["config", "peak RSS MB", "push MB/s", "pop MB/s", "spilled MB", "reloaded MB",
         "resident peak MB", "pop waits"],
        [[name, f"{int(r['peak_kb']) / 1024:.1f}", r["push_mb_s"], r["pop_mb_s"], r["spilled_mb"],
          r["loaded_mb"], f"{int(r['peak_resident_kb']) / 1024:.1f}", r["waits"]]
         for name, r in rss],
    ))
    out.append(f"spill files left behind: {len(leftovers)}")
    results = {
        "throughput": {r["impl"]: r for r in tp},
        "small": {r["impl"]: r for r in small},
        "rss": {name: r for name, r in rss},
        "leftover_spill_entries": len(leftovers),
    }
    return "\n\n".join(out), results


def test_tape_benchmark(benchmark):
    """pytest-benchmark entry point: one round; the numbers go to extra_info."""
    text, results = benchmark.pedantic(run_all, rounds=1, iterations=1)
    print("\n" + text)
    for section, rows in results.items():
        benchmark.extra_info[section] = rows
    assert results["throughput"]["tape"]["ok"] == "1"
    assert results["leftover_spill_entries"] == 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000_000, help="values per cycle")
    ap.add_argument("--limit", default="16M", help="TORCHCLAD_TAPE_MEMORY_LIMIT for the spill run")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    text, _ = run_all(args.n, args.limit, args.reps)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
