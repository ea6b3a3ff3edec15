"""JIT build of generated derivatives as pybind11 modules, with an on-disk cache.

This is the build of a translation unit of generated derivatives *with* pybind11 bindings
(:func:`load`): tests, the corpus harness and the fused GPT-2 use it. User kernels
(``torchclad.function`` / ``gradient``) take the quicker path of :mod:`torchclad.toolchain.jit`
(plain C++, C entry points). Both keep their entries in the store of
:mod:`torchclad.toolchain.store` (directory safety, locks, atomic entries). An entry here::

    <key>/source.cpp        the compiled source: translation unit + pybind11 glue
    <key>/<module><EXT>     the extension
    <key>/build.log         compiler command and output
    <key>/manifest.json     {key, module, so, name, files: {<module><EXT>: sha256}}; written last

``key`` = sha256 over the translation unit, the glue, the compiler argv and ``--version``
output, the torchclad runtime headers, and the torch, Python and torchclad versions.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Sequence

from . import compiler as _cc
from . import store
from .glue import TranslationUnit, jit_glue, make_tu
from .store import CacheDirError, LockTimeout, cache_dir, default_cache_dir

__all__ = [
    "CacheDirError",
    "LockTimeout",
    "cache_dir",
    "default_cache_dir",
    "load",
    "plan",
    "BuildPlan",
    "key_for",
    "runtime_digest",
    "versions",
]

ENV_CACHE_DIR = store.ENV_CACHE_DIR
DEFAULT_LOCK_TIMEOUT = store.DEFAULT_LOCK_TIMEOUT
_FORMAT = "torchclad-jit-cache-v2"

_validated_root = cache_dir  # ``load`` has a parameter of the same name


# ----------------------------------------------------------------------------------------------
# Key


@functools.lru_cache(maxsize=None)
def versions() -> tuple[str, str, str]:
    from importlib import metadata

    try:
        torch_v = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_v = "none"
    tc = sys.modules.get("torchclad")
    tc_v = getattr(tc, "__version__", None)
    if not tc_v:
        try:
            tc_v = metadata.version("torchclad")
        except metadata.PackageNotFoundError:
            tc_v = "unknown"
    py_v = f"{sys.version} {sys.implementation.cache_tag} {_cc.ext_suffix()}"
    return torch_v, py_v, tc_v


def runtime_digest() -> str:
    """Hash of the torchclad runtime headers (they are part of what the code is built from)."""
    h = hashlib.sha256()
    rt = _cc.runtime_include_dir()
    if rt is not None:
        for f in sorted(p for p in rt.rglob("*") if p.is_file()):
            h.update(str(f.relative_to(rt)).encode() + b"\0")
            h.update(f.read_bytes() + b"\0")
    return h.hexdigest()


def key_for(tu_text: str, glue_text: str, argv: Sequence[str], compiler_version: str) -> str:
    """sha256 over everything that determines the built extension."""
    torch_v, py_v, tc_v = versions()
    return store.digest((
        ("format", _FORMAT),
        ("tu", tu_text),
        ("glue", glue_text),
        ("argv", "\0".join(argv)),
        ("compiler", compiler_version),
        ("runtime", runtime_digest()),
        ("torch", torch_v),
        ("python", py_v),
        ("torchclad", tc_v),
    ))


# ----------------------------------------------------------------------------------------------
# Entries


def _valid_entry(entry: Path, key: str, so_name: str) -> Path | None:
    """The extension of a complete, untampered entry, else None."""
    manifest = store.read_manifest(entry, key)
    if manifest is None or manifest.get("so") != so_name or so_name not in manifest["files"]:
        return None
    return entry / so_name


def _compile_entry(p: "BuildPlan", root: Path) -> Path:
    """Compile ``p`` into the entry ``root/<key>`` (the caller holds the key's lock); a failed
    build is kept under ``failed/<key>``."""

    def build(tmp: Path) -> dict:
        src = tmp / "source.cpp"
        src.write_text(p.source)
        sys.stderr.write(f"torchclad: compiling {p.tu.name} (first use, cached afterwards)...\n")
        sys.stderr.flush()
        _cc.run_compiler(p.argv(str(src), str(tmp / p.so_name)), cwd=tmp,
                         source=str(src), log=str(tmp / "build.log"))
        return {"module": p.module, "so": p.so_name, "name": p.tu.name}

    try:
        entry = store.build_entry(root, p.key, build, lambda m: [m["so"]])
    except _cc.BuildError as e:
        kept = getattr(e, "kept", None)
        if kept is not None:
            where = Path(kept) / "source.cpp"
            e.args = (str(e.args[0]).replace(str(e.source), str(where)),)
            e.source = str(where)
        raise
    return entry / p.so_name


def _import_so(module: str, so: Path) -> ModuleType:
    loader = importlib.machinery.ExtensionFileLoader(module, str(so))
    spec = importlib.util.spec_from_file_location(module, str(so), loader=loader)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    sys.modules[module] = mod
    return mod


@dataclass(frozen=True)
class BuildPlan:
    """Everything :func:`load` decides before touching the disk (see :func:`plan`)."""

    tu: TranslationUnit
    module: str  # extension module name (PyInit_<module>)
    glue: str
    so_name: str
    key: str
    flags: dict

    @property
    def source(self) -> str:
        return self.tu.text + self.glue

    def argv(self, source: str, output: str) -> list[str]:
        return _cc.command(source, output, **self.flags)


def plan(
    derivs_or_tu: Any,
    *,
    name: str | None = None,
    extra_cflags: Sequence[str] = (),
    extra_ldflags: Sequence[str] = (),
    extra_include_dirs: Sequence[str | os.PathLike] = (),
    native: bool = False,
) -> BuildPlan:
    """Module name, glue and cache key of a build, without building (arguments as :func:`load`)."""
    tu = make_tu(derivs_or_tu, name=name)
    if native:
        from .jit import native_flags

        prelude, cflags, ldflags = native_flags()
        tu = TranslationUnit(tu.name, prelude + tu.text, tu.derivatives)
        extra_cflags, extra_ldflags = [*cflags, *extra_cflags], [*ldflags, *extra_ldflags]
    module = f"_torchclad_{tu.name}_{tu.digest[:16]}"
    glue = jit_glue(tu, module)
    cxx = _cc.compiler()
    flags = dict(extra_cflags=list(extra_cflags), extra_ldflags=list(extra_ldflags),
                 extra_include_dirs=[str(d) for d in extra_include_dirs], cxx=cxx)
    key = key_for(tu.text, glue, _cc.command("<source>", "<output>", **flags),
                  _cc.compiler_version(cxx))
    return BuildPlan(tu=tu, module=module, glue=glue, so_name=module + _cc.ext_suffix(),
                     key=key, flags=flags)


_loaded: dict[str, ModuleType] = {}
_loaded_lock = threading.Lock()


def load(
    derivs_or_tu: Any,
    *,
    name: str | None = None,
    extra_cflags: Sequence[str] = (),
    extra_ldflags: Sequence[str] = (),
    extra_include_dirs: Sequence[str | os.PathLike] = (),
    cache_dir: str | os.PathLike | None = None,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    native: bool = False,
) -> ModuleType:
    """Compile (once) and import the pybind11 module of one translation unit.

    ``derivs_or_tu``: a Derivative, a sequence of Derivatives of one source, or a
    :class:`~torchclad.toolchain.glue.TranslationUnit`. ``extra_cflags`` (e.g. ``["-O0"]``) come
    after the default flags; ``extra_include_dirs`` before the default include directories.
    ``native``: also the vector math, alias-check limit and ISA flags of a user kernel on the
    running CPU (:func:`torchclad.toolchain.jit.native_flags`; the key names them).
    The module has the bindings described in :mod:`torchclad.toolchain.glue`, plus
    ``__torchclad_key__`` and ``__torchclad_source__`` (the path of the compiled source).
    Raises :class:`~torchclad.toolchain.BuildError` (with the compiler's stderr and the kept
    source), :class:`CacheDirError`, :class:`LockTimeout`.
    """
    p = plan(derivs_or_tu, name=name, extra_cflags=extra_cflags, extra_ldflags=extra_ldflags,
             extra_include_dirs=extra_include_dirs, native=native)
    with _loaded_lock:
        if p.key in _loaded:
            return _loaded[p.key]
        root = _validated_root(cache_dir)
        entry = root / p.key
        so = _valid_entry(entry, p.key, p.so_name)
        if so is None:
            with store.locked(root / "locks" / f"{p.key}.lock", lock_timeout):
                so = _valid_entry(entry, p.key, p.so_name)  # built while we waited?
                if so is None:
                    so = _compile_entry(p, root)
        mod = _import_so(p.module, so)
        mod.__torchclad_key__ = p.key
        mod.__torchclad_source__ = str(entry / "source.cpp")
        _loaded[p.key] = mod
        return mod
