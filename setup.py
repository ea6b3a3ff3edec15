"""Build step of torchclad (metadata lives in pyproject.toml).

At install time the engine (``torchclad.ad``, imported from this source tree) generates the
derivative code of every kernel registered in ``torchclad/kernels.py`` (sources in
``csrc/kernels/``) into ``torchclad/_generated/`` (kept for reading, not committed), and
pybind11 compiles kernels, generated pullbacks and glue into one extension, ``torchclad._C``.
Importing an installed torchclad compiles nothing.

    pip install --no-build-isolation -e .      # what `make install` runs
"""

from __future__ import annotations

import os
import shutil
import sys
import types
from pathlib import Path

from pybind11.setup_helpers import Pybind11Extension
from pybind11.setup_helpers import build_ext as _pybind11_build_ext
from setuptools import setup

ROOT = Path(__file__).resolve().parent
GENERATED = ROOT / "torchclad" / "_generated"
RUNTIME = ROOT / "csrc" / "runtime"
HAVE_ENGINE = (ROOT / "torchclad" / "ad" / "__init__.py").is_file()


def _tree_package():
    """Import torchclad.{ad,build,kernels} from this tree without running torchclad/__init__.py.

    The package's __init__ may import things that need the extension this step is building, so a
    bare namespace-like stand-in for ``torchclad`` is put in sys.modules first.
    """
    for k in [k for k in sys.modules if k == "torchclad" or k.startswith("torchclad.")]:
        del sys.modules[k]
    pkg = types.ModuleType("torchclad")
    pkg.__path__ = [str(ROOT / "torchclad")]
    sys.modules["torchclad"] = pkg
    import torchclad.ad as ad
    import torchclad.build.aot as aot
    import torchclad.build.compiler as compiler
    import torchclad.kernels as kernels

    return types.SimpleNamespace(ad=ad, aot=aot, compiler=compiler, kernels=kernels)


class build_ext(_pybind11_build_ext):
    """Generate the derivative sources, then compile them (serially) into torchclad._C."""

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
        print(f"torchclad: generating derivatives of {len(tc.kernels.KERNELS)} kernel(s) "
              f"into {GENERATED.relative_to(ROOT)}/", flush=True)
        out = tc.aot.generate(
            GENERATED,
            tc.kernels.KERNELS,
            kernel_dir=ROOT / "csrc" / "kernels",
            differentiate=tc.ad.differentiate,
            relative_to=ROOT,
            read_source=lambda spec: tc.kernels.unit_source(spec, ROOT / "csrc"),
        )
        # KernelSpec.libraries, e.g. "torch_cpu" (BLAS for matmul): -L, -l and an rpath.
        link = [tc.compiler.external_library(name)
                for name in sorted({n for s in tc.kernels.KERNELS for n in s.libraries})]
        for ext in self.extensions:
            ext.sources = [os.path.relpath(p, ROOT) for p in out.sources]
            ext.include_dirs = [str(RUNTIME), *ext.include_dirs]
            ext.depends = [os.path.relpath(p, ROOT) for p in (*out.units, *RUNTIME.rglob("*.h"))]
            # pybind11 already set -std=c++17 -fvisibility=hidden -g0; add ours (same as the JIT)
            ext.extra_compile_args += [f for f in tc.compiler.CXXFLAGS if f not in ext.extra_compile_args]
            ext.extra_link_args += [f for f in tc.compiler.LDFLAGS if f not in ("-shared", *ext.extra_link_args)]
            ext.libraries += [lib for lib in tc.compiler.LIBRARIES if lib not in ext.libraries]
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
    ext_modules.append(
        Pybind11Extension(
            "torchclad._C",
            sources=[os.path.join("torchclad", "_generated", "_C_module.cpp")],  # set by build_ext
            cxx_std=17,
        )
    )
else:
    print("torchclad build: WARNING: torchclad/ad/__init__.py is missing (engine not in this "
          "tree); building without torchclad._C", file=sys.stderr)

setup(ext_modules=ext_modules, cmdclass={"build_ext": build_ext})
