"""Build machinery: pybind11 glue, compiler invocation, the JIT cache, the AOT build of ``_C``.

- :func:`load` compiles a translation unit of generated derivatives (once; cached on disk under
  ``$TORCHCLAD_CACHE_DIR``) and imports it as a module.
- :func:`include_dirs` lists the include directories generated code needs (torchclad runtime
  headers, pybind11, Python).
- :func:`generated_dir` is where the install step writes the built-in kernels' generated C++.

This package does not import torch and compiles nothing at import time.
"""

from __future__ import annotations

from pathlib import Path

from .cache import BuildPlan, load, plan
from .store import CacheDirError, LockTimeout, cache_dir, default_cache_dir
from .compiler import BuildError, include_dirs, runtime_include_dir
from .glue import GlueError, TranslationUnit, make_tu

__all__ = [
    "load",
    "plan",
    "BuildPlan",
    "BuildError",
    "CacheDirError",
    "LockTimeout",
    "GlueError",
    "TranslationUnit",
    "make_tu",
    "cache_dir",
    "default_cache_dir",
    "include_dirs",
    "runtime_include_dir",
    "generated_dir",
]


def generated_dir() -> Path:
    """``torchclad/_generated``: the generated C++ of the built-in kernels (after install)."""
    return Path(__file__).resolve().parent.parent / "_generated"
