"""torchclad ops in a C++ program (``torchclad aot``) against the same functions in LibTorch.

Builds benchmarks/libtorch (CMake, against the installed torch wheel's LibTorch) with the ops
``torchclad aot`` writes from examples/libtorch/kernels (gelu, layernorm), and runs its program
``bench_ops``, which times in one process, interleaved round by round, on one thread, by the
thread's CPU time:

- ``torchclad``: ``torchclad_ops::<name>(...)``, the backward the generated reverse sweep;
- ``native``: LibTorch's fused op with its hand-written backward (``at::gelu``,
  ``at::layer_norm``);
- ``composed``: the same math in elementwise LibTorch ops, differentiated by torch::autograd;

for the per-call overhead (one element: a forward without grad, a forward + backward) and a
forward + backward at a small (16 x 64) and a large (2048 x 768) size. Ratios are medians of
per-round ratios. The program first checks that the implementations agree.

Results: section ``libtorch`` of benchmarks/results.json, table in results.md.

    python benchmarks/bench_libtorch.py [--quick] [--no-write] [--native]

``--native`` builds the ops with the generated CMakeLists.txt's TORCHCLAD_NATIVE=ON
(-march=native); the default is the portable build a user gets without it.
    pytest benchmarks/bench_libtorch.py --benchmark-only -s
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchlib as bl

SECTION = "libtorch"
HERE = Path(__file__).resolve().parent
KERNELS = bl.ROOT / "examples" / "libtorch" / "kernels"


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(bl.ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                OMP_NUM_THREADS="1")


def _run(argv: list[str], what: str) -> str:
    p = subprocess.run(argv, capture_output=True, text=True, env=_env())
    if p.returncode != 0:
        raise RuntimeError(f"{what} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p.stdout


def build(tmp: Path, native: bool = False) -> tuple[Path, float]:
    """The benchmark program, and the wall time of its configure + build."""
    import torch.utils

    ops = tmp / "ops"
    for name in ("gelu", "layernorm"):
        _run([sys.executable, "-m", "torchclad", "aot", str(KERNELS / f"{name}.cpp"), "--fn", name,
              "-o", str(ops)], f"torchclad aot {name}")
    t0 = time.perf_counter()
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    _run(["cmake", "-S", str(HERE / "libtorch"), "-B", str(tmp / "build"), *gen,
          f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}", "-DCMAKE_BUILD_TYPE=Release",
          f"-DTORCHCLAD_OPS_DIR={ops}", f"-DTORCHCLAD_NATIVE={'ON' if native else 'OFF'}"],
         "cmake configure")
    _run(["cmake", "--build", str(tmp / "build"), "-j", "2"], "cmake --build")
    return tmp / "build" / "bench_ops", time.perf_counter() - t0


def run_all(quick: bool = False, write: bool = True, native: bool = False) -> dict:
    payload: dict = {"machine": bl.machine_info(), "rows": [], "native": native}
    with tempfile.TemporaryDirectory(prefix="torchclad_bench_libtorch_") as tmp:
        try:
            exe, build_s = build(Path(tmp), native)
            payload["build_wall_s"] = build_s
            out = json.loads(_run([str(exe), *(["--quick"] if quick else [])], "bench_ops"))
        except RuntimeError as e:
            payload["error"] = str(e)[-3000:]
            return payload
    payload["rows"] = out["cases"]
    payload["rounds"] = out["rounds"]
    payload["threads"] = out["threads"]
    payload["quick"] = quick
    payload["method"] = ("one C++ process, implementations interleaved round by round; each "
                         "sample = thread CPU time of `iters` calls / iters, one thread; ratio = "
                         "median of per-round ratios (impl / torchclad); outputs and gradients "
                         "checked equal first")
    if write:
        bl.update_section(SECTION, payload)
    return payload


def test_libtorch(benchmark):
    """pytest-benchmark entry point: build the program, run every case once."""
    import render

    payload = benchmark.pedantic(run_all, rounds=1, iterations=1)
    assert "error" not in payload, payload.get("error")
    print("\n" + render.libtorch_table(payload))
    benchmark.extra_info.update(build_wall_s=payload["build_wall_s"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds, smaller large size")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--native", action="store_true",
                    help="ops compiled with -march=native (CMake option TORCHCLAD_NATIVE)")
    a = ap.parse_args(argv)
    import render

    payload = run_all(quick=a.quick, write=not a.no_write, native=a.native)
    if "error" in payload:
        print(payload["error"], file=sys.stderr)
        return 1
    print(render.libtorch_table(payload))
    return 0


if __name__ == "__main__":
    sys.exit(main())
