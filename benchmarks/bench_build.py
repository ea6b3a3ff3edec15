"""Generation + compile time of the built-in kernels (torchclad/builtin/registry.py's registry).

Runs what ``setup.py`` runs, into a temporary directory, timing each step on its own:

1. the engine (``torchclad.engine.differentiate``) on every registry entry, through
   ``torchclad.toolchain.aot.generate`` (which also writes the pybind11 glue);
2. a fresh ``g++`` of every unit's bindings file (kernel + generated derivatives + glue) and
   of the module file, with the package's flags (``torchclad.toolchain.compiler``) -- no build
   cache, no ccache. Two compilers run at a time (the suite must fit its time budget on a
   2-core machine); each one's CPU time (user + sys, from ``wait4``) is its cost, and their
   sum is what the package's serial build spends compiling on an idle machine;
3. the link into one extension (not imported).

Results: section ``build`` of benchmarks/results.json, table in results.md.

    python benchmarks/bench_build.py
    pytest benchmarks/bench_build.py --benchmark-only -s
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import benchlib as bl

SECTION = "build"


def run_all(write: bool = True) -> dict:
    from torchclad.builtin import registry as kernels
    from torchclad.engine import differentiate
    from torchclad.toolchain import aot, compiler

    machine = bl.machine_info(with_torch=False)
    gen_s: dict[str, float] = defaultdict(float)
    names: dict[str, list[str]] = defaultdict(list)

    def timed_differentiate(source, name, wrt=None, **kw):
        t0 = time.perf_counter()
        d = differentiate(source, name, wrt, **kw)
        unit = next(s.unit for s in kernels.KERNELS if s.name == name)
        gen_s[unit] += time.perf_counter() - t0
        names[unit].append(name)
        return d

    payload: dict = {"machine": machine, "rows": []}
    with tempfile.TemporaryDirectory(prefix="torchclad_bench_build_") as tmp:
        out = Path(tmp)
        t0 = time.perf_counter()
        src = aot.generate(out / "gen", kernels.KERNELS, kernel_dir=kernels.kernel_dir(),
                           differentiate=timed_differentiate, relative_to=bl.ROOT,
                           read_source=lambda spec: kernels.unit_source(spec))
        payload["generate_wall_s"] = time.perf_counter() - t0

        cflags = [*compiler.compiler(), *compiler.CXXFLAGS,
                  *(f"-I{d}" for d in (out / "gen", *compiler.include_dirs()))]
        objs, compile_s, compile_wall = [], {}, {}

        def compile_one(source: Path) -> tuple[str, Path]:
            obj = out / (source.stem + ".o")
            t1 = time.perf_counter()
            proc = subprocess.Popen([*cflags, "-c", str(source), "-o", str(obj)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            err = proc.stderr.read().decode(errors="replace")
            _, status, ru = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            compile_wall[source.stem] = time.perf_counter() - t1
            compile_s[source.stem] = ru.ru_utime + ru.ru_stime
            if proc.returncode != 0:
                raise subprocess.CalledProcessError(proc.returncode, cflags, stderr=err)
            return source.stem, obj

        try:
            t1 = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
                objs = [obj for _, obj in pool.map(compile_one, src.sources)]
            payload["compile_wall_s"] = time.perf_counter() - t1
            libs = [compiler.external_library(n)
                    for n in sorted({n for s in kernels.KERNELS for n in s.libraries})]
            t1 = time.perf_counter()
            subprocess.run([*compiler.compiler(), *compiler.LDFLAGS, *map(str, objs), "-o",
                            str(out / ("_C" + compiler.ext_suffix())),
                            *(a for d, lib in libs for a in (f"-L{d}", f"-l{lib}")),
                            *(f"-l{lib}" for lib in compiler.LIBRARIES)],
                           check=True, capture_output=True, text=True)
            payload["link_s"] = time.perf_counter() - t1
        except subprocess.CalledProcessError as e:
            payload["error"] = f"{' '.join(e.cmd[:3])} ...: {(e.stderr or '')[-1500:]}"

    for unit in names:
        payload["rows"].append({"unit": unit, "functions": names[unit], "generate_s": gen_s[unit],
                                "compile_s": compile_s.get(f"{unit}_bindings"),
                                "compile_wall_s": compile_wall.get(f"{unit}_bindings")})
    payload["module_compile_s"] = compile_s.get(f"{aot.MODULE}_module")
    payload["total_generate_s"] = sum(gen_s.values())
    payload["total_compile_s"] = sum(compile_s.values())
    payload["kernels"] = len(kernels.KERNELS)
    payload["cxxflags"] = list(compiler.CXXFLAGS)
    payload["method"] = ("engine timed per registry entry inside aot.generate (wall); g++ one "
                         "process per unit, two at a time, fresh temporary directory, each "
                         "unit's compile cost = the compiler's CPU time (user + sys); one run")
    if write:
        bl.update_section(SECTION, payload)
    return payload


def test_build(benchmark):
    """pytest-benchmark entry point: one generation + compile of every built-in kernel."""
    import render

    if not bl.have_cxx():
        import pytest

        pytest.skip("no C++ compiler")
    payload = benchmark.pedantic(run_all, rounds=1, iterations=1)
    print("\n" + render.build_table(payload))
    benchmark.extra_info.update(total_generate_s=payload["total_generate_s"],
                                total_compile_s=payload["total_compile_s"])
    assert "error" not in payload, payload.get("error")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args(argv)
    import render

    payload = run_all(write=not a.no_write)
    print(render.build_table(payload))
    return 1 if "error" in payload else 0


if __name__ == "__main__":
    sys.exit(main())
