"""Build step of torchclad (metadata lives in pyproject.toml).

At install time the engine (``torchclad.engine``, imported from this source tree) generates the
derivative code of every kernel registered in ``torchclad/builtin/registry.py`` (sources in
``csrc/kernels/``) into ``torchclad/_generated/`` (kept for reading, not committed), and
pybind11 compiles kernels, generated pullbacks and glue into one extension, ``torchclad._C``;
the same kernels are compiled again, with C entry points instead of pybind11 glue, into
CPU-specific libraries ``torchclad._C_avx2`` / ``_C_avx512`` (``torchclad/toolchain/isa.py``:
runtime dispatch instead of ``-march=native``; set ``TORCHCLAD_ISA_VARIANTS=`` for a quicker
baseline-only build); ``torchclad._C_dispatch`` is the C++ eager path of those ops and of user
kernels. The extensions compile in parallel. Importing an installed torchclad compiles nothing.

    pip install --no-build-isolation -e .      # what `make install` runs
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import types
from pathlib import Path

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension
from pybind11.setup_helpers import build_ext as _pybind11_build_ext
from setuptools import Extension, setup

ROOT = Path(__file__).resolve().parent
GENERATED = ROOT / "torchclad" / "_generated"
RUNTIME = ROOT / "csrc" / "runtime"
HAVE_ENGINE = (ROOT / "torchclad" / "engine" / "__init__.py").is_file()


def _tree_package():
    """Import torchclad.{engine,toolchain,builtin.registry} from this tree without running torchclad/__init__.py.

    The package's __init__ may import things that need the extension this step is building, so a
    bare namespace-like stand-in for ``torchclad`` is put in sys.modules first.
    """
    for k in [k for k in sys.modules if k == "torchclad" or k.startswith("torchclad.")]:
        del sys.modules[k]
    pkg = types.ModuleType("torchclad")
    pkg.__path__ = [str(ROOT / "torchclad")]
    sys.modules["torchclad"] = pkg
    import torchclad.engine as engine
    import torchclad.toolchain.aot as aot
    import torchclad.toolchain.compiler as compiler
    import torchclad.toolchain.isa as isa
    import torchclad.toolchain.probe as probe
    import torchclad.builtin.registry as registry

    return types.SimpleNamespace(engine=engine, aot=aot, compiler=compiler, isa=isa, probe=probe,
                                 registry=registry)


def _isa_module():
    """torchclad/toolchain/isa.py on its own (it imports nothing of the package)."""
    spec = importlib.util.spec_from_file_location("_torchclad_build_isa",
                                                  ROOT / "torchclad" / "toolchain" / "isa.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _configure_dispatch(ext) -> None:
    """torchclad._C_dispatch (csrc/dispatch/kernel_call.cpp): the C++ eager path of user-kernel
    ops, built against torch's own headers and libraries (like a torch C++ extension)."""
    import sysconfig

    import torch
    from torch.utils import cpp_extension

    ext.include_dirs = [*cpp_extension.include_paths(), sysconfig.get_paths()["include"]]
    ext.library_dirs = list(cpp_extension.library_paths())
    ext.runtime_library_dirs = list(cpp_extension.library_paths())
    ext.libraries = ["c10", "torch", "torch_cpu", "torch_python"]
    ext.extra_compile_args = [
        "-std=c++20", "-O2", "-g0", "-fvisibility=hidden", "-fno-wrapv",
        f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
        "-DTORCH_EXTENSION_NAME=_C_dispatch", "-DTORCH_API_INCLUDE_EXTENSION_H",
        # at::parallel_for (zero_fill.h) is inline OpenMP in torch's headers: without -fopenmp
        # it compiles to a serial loop. The libgomp it links is torch's (already loaded).
        "-fopenmp"]
    ext.extra_link_args = ["-fopenmp"]


class build_ext(_pybind11_build_ext):
    """Generate the derivative sources, then compile them into torchclad._C (and its
    CPU-specific variants) and torchclad._C_dispatch -- the extensions in parallel, one thread
    each, and each one's sources in parallel ($TORCHCLAD_BUILD_JOBS caps both counts; 1 builds
    everything one after another)."""

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            jobs = os.environ.get("TORCHCLAD_BUILD_JOBS", "").strip()
            self.parallel = int(jobs) if jobs else max(1, len(self.extensions or ()))

    def run(self):
        inplace = self.inplace or getattr(self, "editable_mode", False)
        if self.extensions:
            self._generate()
        super().run()
        if self.extensions and not inplace:
            self._bundle(Path(self.build_lib) / "torchclad")

    def _generate(self):
        tc = _tree_package()
        if not (RUNTIME / "torchclad" / "runtime.h").is_file():
            sys.exit(f"torchclad build: {RUNTIME / 'torchclad' / 'runtime.h'} is missing")
        print(f"torchclad: generating derivatives of {len(tc.registry.KERNELS)} kernel(s) "
              f"into {GENERATED.relative_to(ROOT)}/", flush=True)
        cxx = tc.compiler.compiler()
        # what the compiler can do (probed in parallel), recorded for the JIT of user kernels
        caps = tc.probe.probe(cxx, tc.compiler.compiler_version(cxx))
        GENERATED.mkdir(parents=True, exist_ok=True)
        tc.probe.record(GENERATED / tc.probe.RECORD_FILE, caps)
        variants = [v for v in (e.torchclad_isa for e in self.extensions)
                    if v not in ("default", "dispatch")]
        dropped = [v for v in variants if v not in caps.variants]
        for v in dropped:
            print(f"torchclad build: the compiler does not take the {v} flags "
                  f"({' '.join(tc.isa.VARIANTS[v])}); not building torchclad._C_{v}", flush=True)
        self.extensions = [e for e in self.extensions if e.torchclad_isa not in dropped]
        variants = [v for v in variants if v not in dropped]
        out = tc.aot.generate(
            GENERATED,
            tc.registry.KERNELS,
            kernel_dir=ROOT / "csrc" / "kernels",
            differentiate=tc.engine.differentiate,
            relative_to=ROOT,
            read_source=lambda spec: tc.registry.unit_source(spec, ROOT / "csrc"),
            variants=variants,
        )
        # vector libm (glibc libmvec) for the kernels, when the C library has it (isa.py)
        builtin_math = {f for pair in tc.isa.VECMATH_PAIRS for f in pair}
        vecmath = [f for f in caps.vecmath if f in builtin_math]
        header = GENERATED / "torchclad_vecmath.h"
        text = tc.isa.vecmath_header(vecmath)
        if not header.is_file() or header.read_text() != text:
            header.write_text(text)
        vec_cflags = [*tc.isa.VECMATH_CFLAGS, "-include", str(header)] if vecmath else []
        if caps.alias_checks:
            vec_cflags += list(tc.isa.KERNEL_CFLAGS)
        vec_libs = list(tc.isa.VECMATH_LIBS) if vecmath else []
        print(f"torchclad build: vector math (libmvec) for {', '.join(vecmath) or 'nothing'}; "
              f"CPU-specific builds: {', '.join(variants) or 'none'}", flush=True)
        # KernelSpec.libraries, e.g. "torch_cpu" (BLAS for matmul): -L, -l and an rpath.
        link = [tc.compiler.external_library(name)
                for name in sorted({n for s in tc.registry.KERNELS for n in s.libraries})]
        for ext in self.extensions:
            isa = ext.torchclad_isa
            if isa == "dispatch":
                _configure_dispatch(ext)
                continue
            srcs = out.sources if isa == "default" else out.variant_sources[isa]
            ext.sources = [os.path.relpath(p, ROOT) for p in srcs]
            ext.include_dirs = [str(RUNTIME), *ext.include_dirs]
            ext.depends = [os.path.relpath(p, ROOT)
                           for p in (*out.units, *srcs, header, *RUNTIME.rglob("*.h"))]
            if isa != "default":  # a plain library (C entry points): what pybind11 would set
                ext.extra_compile_args += ["-std=c++17", "-fvisibility=hidden", "-g0"]
            # pybind11 already set -std=c++17 -fvisibility=hidden -g0; add ours (same as the JIT)
            ext.extra_compile_args += [f for f in tc.compiler.CXXFLAGS if f not in ext.extra_compile_args]
            ext.extra_compile_args += vec_cflags
            if isa != "default":
                ext.extra_compile_args += list(tc.isa.VARIANTS[isa])
            ext.extra_link_args += [f for f in tc.compiler.LDFLAGS if f not in ("-shared", *ext.extra_link_args)]
            ext.libraries += [lib for lib in tc.compiler.LIBRARIES if lib not in ext.libraries]
            ext.libraries += vec_libs
            for d, lib in link:
                ext.library_dirs.append(d)
                ext.runtime_library_dirs.append(d)
                ext.libraries.append(lib)

    def _bundle(self, pkg: Path):
        """Non-editable builds: ship the generated sources and the runtime headers."""
        shutil.copytree(GENERATED, pkg / "_generated", dirs_exist_ok=True)
        shutil.copytree(RUNTIME / "torchclad", pkg / "include" / "torchclad", dirs_exist_ok=True)


ext_modules = []
if HAVE_ENGINE:
    for _isa in ["default", *_isa_module().requested_variants()]:
        _name = "_C" if _isa == "default" else f"_C_{_isa}"
        _src = [os.path.join("torchclad", "_generated", f"{_name}_module.cpp")]  # set by build_ext
        # _C is the pybind11 module; the CPU-specific builds are plain libraries with C entry
        # points (torchclad/toolchain/aot.py), loaded by torchclad/builtin/loader.py
        _ext = (Pybind11Extension(f"torchclad.{_name}", sources=_src, cxx_std=17)
                if _isa == "default" else Extension(f"torchclad.{_name}", sources=_src,
                                                    language="c++"))
        _ext.torchclad_isa = _isa
        ext_modules.append(_ext)
    _ext = Extension("torchclad._C_dispatch", sources=["csrc/dispatch/kernel_call.cpp"],
                     depends=["csrc/dispatch/adjoint_pool.h", "csrc/dispatch/zero_fill.h"],
                     language="c++")
    _ext.torchclad_isa = "dispatch"
    ext_modules.append(_ext)
else:
    print("torchclad build: WARNING: torchclad/engine/__init__.py is missing (engine not in this "
          "tree); building without torchclad._C", file=sys.stderr)

# The sources of one extension compile in parallel too (one thread per CPU; $TORCHCLAD_BUILD_JOBS
# sets the count): _C's pybind11 units would otherwise be the critical path.
ParallelCompile("TORCHCLAD_BUILD_JOBS", default=0).install()
setup(ext_modules=ext_modules, cmdclass={"build_ext": build_ext})
