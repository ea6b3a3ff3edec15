"""The prebuilt built-in kernels: the extension ``torchclad._C`` -- or its best CPU-specific
variant -- and each kernel's signature as that extension was built.

``_C`` is a pybind11 module; a CPU-specific build (``torchclad/_C_avx2<EXT>``,
``_C_avx512<EXT>``) is a plain shared library with the C entry points of
:mod:`torchclad.toolchain.capi`, loaded here as a :class:`~torchclad.toolchain.clib.
KernelLibrary` (the same bindings by name, and the C++ eager path of
:mod:`torchclad.bridge.fastpath`), its signatures read from ``_C``."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from torchclad.bridge.kernel import Kernel
from torchclad.builtin import registry

__all__ = ["extension", "signature", "kernel"]


@functools.lru_cache(maxsize=None)
def extension():
    """The compiled built-in kernels: the best CPU-specific build this CPU runs
    (``torchclad._C_avx512`` / ``_C_avx2``, see :mod:`torchclad.toolchain.isa`), else
    ``torchclad._C``. A CPU-specific module from another build than ``_C`` (left over) is never
    used."""
    from torchclad.builtin import blas
    from torchclad.toolchain import isa

    blas.choose()                     # before any kernel's first GEMM (see builtin/blas.py)
    try:
        from torchclad import _C
    except ImportError as e:
        raise ImportError(
            "torchclad._C (the built-in kernels, compiled at install time) is missing; "
            "install torchclad with `make install` (pip install --no-build-isolation -e .)"
        ) from e
    build = getattr(_C, "__torchclad_build__", None)
    for variant in isa.select(list(isa.VARIANTS)):
        if variant == "default":
            break
        lib = _variant(_C, variant)
        if lib is not None and build is not None and lib.__torchclad_build__ == build:
            return lib
    return _C


def _variant(base: Any, variant: str):
    """The CPU-specific library ``torchclad._C_<variant>`` as a KernelLibrary, or None (not
    built, not loadable on this machine, or not one of ours)."""
    from torchclad.toolchain import compiler
    from torchclad.toolchain.clib import KernelLibrary
    from torchclad.toolchain.glue import calls, scalar_types

    where = getattr(base, "__file__", None)      # a stand-in module (tests) may have none
    if where is None:
        return None
    path = Path(where).with_name(f"_C_{variant}{compiler.ext_suffix()}")
    sigs = getattr(base, "__torchclad_signatures__", None)
    if not path.is_file() or not sigs:
        return None
    libs = [(path, ("float", "double"),
             [c for sig in sigs.values() for s in scalar_types(sig) for c in calls(sig, s)])]
    try:
        lib = KernelLibrary(libs)
    except OSError:
        return None
    lib.__torchclad_build__ = lib.string("torchclad_build_id")
    lib.__torchclad_isa__ = lib.string("torchclad_isa")
    lib.__torchclad_signatures__ = sigs
    lib.__file__ = str(path)
    return lib


@functools.lru_cache(maxsize=None)
def signature(name: str) -> Any:
    """The Derivative-like signature of built-in kernel ``name``, as ``torchclad._C`` was built.

    ``_C.__torchclad_signatures__`` is used when the build records it; otherwise the engine
    re-derives it from the kernel source (the same deterministic run the install step made).
    """
    spec = next((s for s in registry.KERNELS if s.name == name), None)
    if spec is None:
        raise KeyError(f"{name} is not a built-in kernel (see torchclad.builtin.registry.KERNELS)")
    recorded = getattr(extension(), "__torchclad_signatures__", None)
    if recorded is not None and name in recorded:
        return recorded[name]
    from torchclad import engine

    source = registry.unit_source(spec)
    wrt = None if spec.wrt is None else list(spec.wrt)
    return engine.differentiate(source, name, wrt, filename=f"csrc/kernels/{spec.file}")


def kernel(name: str) -> Kernel:
    """Built-in kernel ``name`` with the bindings of :func:`extension`."""
    return Kernel(signature(name), extension())
