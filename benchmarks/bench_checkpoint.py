"""Checkpointing trade-off: time and memory of one gradient of a million-step recurrence.

The recurrence is tests/checkpoint/ode.cpp (explicit Euler over 4 coupled pendulums, state
overwritten in place), differentiated by the engine three ways: every step recorded on the
tape; the same with TORCHCLAD_TAPE_MEMORY_LIMIT (disk offload); and `#pragma torchclad
checkpoint` with segments of K steps (default ceil(sqrt(n))). Each row is a fresh process;
all rows must give the same gradient bits. No timing assertions.

    python benchmarks/bench_checkpoint.py [--n 1000000]
    pytest benchmarks/bench_checkpoint.py --benchmark-only -s
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "ode_build", ROOT / "tests" / "checkpoint" / "ode_build.py")
ode_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ode_build)


def run_all(n: int = 1_000_000, limit: str = "4M") -> tuple[str, list]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_ckpt_") as tmp:
        tmp = Path(tmp)
        exe = ode_build.build(tmp)
        spill = tmp / "spill"
        spill.mkdir()
        configs = [("taped", "taped", {}),
                   (f"taped, limit {limit}", "taped",
                    {"TORCHCLAD_TAPE_MEMORY_LIMIT": limit, "TMPDIR": str(spill)}),
                   ("checkpoint, K = ceil(sqrt(n))", "checkpointed", {})]
        configs += [(f"checkpoint every({k})", f"every:{k}", {})
                    for k in (10, 100, 10_000, 100_000)]
        for name, mode, env in configs:
            best = min((ode_build.run(exe, mode, n, env) for _ in range(3)),
                       key=lambda r: r["ms"])
            rows.append((name, best))
    ref = rows[0][1]["grad"]
    lines = [f"gradient of {n:.0e} Euler steps (4 pendulums), best of 3 fresh processes",
             "| configuration | fwd+bwd ms | tape after forward | peak RSS MB | same bits |",
             "|---|---|---|---|---|"]
    for name, r in rows:
        tb = r["tape_bytes"]
        tape = f"{tb / 2**20:.1f} MB" if tb >= 2**20 else f"{tb / 1024:.1f} KB"
        lines.append(f"| {name} | {r['ms']:.0f} | {tape} | {r['rss_kb'] / 1024:.1f} | "
                     f"{'yes' if r['grad'] == ref else 'NO'} |")
    return "\n".join(lines), rows


def test_checkpoint_benchmark(benchmark):
    text, rows = benchmark.pedantic(run_all, rounds=1, iterations=1)
    print("\n" + text)
    for name, r in rows:
        benchmark.extra_info[name] = {k: v for k, v in r.items() if k != "grad"}
    assert all(r["grad"] == rows[0][1]["grad"] for _, r in rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--limit", default="4M")
    args = ap.parse_args(argv)
    print(run_all(args.n, args.limit)[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
