"""Build machinery: pybind11 glue, compiler invocation, the JIT cache, the AOT build of ``_C``.

- :func:`load` compiles a translation unit of generated derivatives (once; cached on disk under
  ``$TORCHCLAD_CACHE_DIR``) and imports it as a module.
- :func:`include_dirs` lists the include directories generated code needs (torchclad runtime
  headers, pybind11, Python).
- :func:`generated_dir` is where the install step writes the built-in kernels' generated C++.

This package does not import torch and compiles nothing at import time.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from .compiler import BuildError, include_dirs, runtime_include_dir
from .store import CacheDirError, LockTimeout, cache_dir, default_cache_dir

# The pybind11 build (cache.py) and its glue are imported on first use: a user kernel's cache
# hit (jit.py) needs neither.
_LAZY = {"load": "cache", "plan": "cache", "BuildPlan": "cache", "GlueError": "glue",
         "TranslationUnit": "glue", "make_tu": "glue"}


def __getattr__(attr: str):
    if attr in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[attr]}"), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")

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
