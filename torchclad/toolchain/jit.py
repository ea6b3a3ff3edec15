"""User kernels: plain C++ with C entry points, both scalar types compiled at once, cached by
recipe so that a cache hit runs neither libclang nor the compiler.

``torchclad.function`` and ``torchclad.gradient`` share one build per (source, function,
options): the kernel differentiated on every floating parameter. A :class:`Recipe` names it;
its key (:func:`key_of`) is worked out without running anything:

    sha256(format, source text, function, file name, debug, extra_cflags,
           compiler identity (argv + resolved executable's path, size, mtime),
           the ISA variant of the running CPU, digest of the engine / toolchain sources and
           the runtime headers, torchclad version)

:func:`lookup` returns the entry's :class:`Built` (signature, generated code, loaded libraries)
when the store holds a valid one; :func:`build` compiles it from the engine's ``Derivative``.
An entry (in the store of :mod:`torchclad.toolchain.store`)::

    <key>/kernel_f32.cpp, kernel_f64.cpp     one translation unit per scalar type
    <key>/kernel_f32.so,  kernel_f64.so      (a non-template kernel: its own type only)
    <key>/build.log                          the compiler commands and output
    <key>/manifest.json                      signature, generated code, flags, sha256 of the .so

Each translation unit is the vector-math declarations (:func:`torchclad.toolchain.isa.
vecmath_prelude`), ``<torchclad/capi.h>``, ``Derivative.translation_unit()`` (runtime include,
the user source under ``#line 1 "<file>"``, the generated code) and the C entry points
(:mod:`torchclad.toolchain.capi`) -- no pybind11, Python or torch headers. Default flags
(:func:`flags`): ``compiler.CXXFLAGS`` (``-O3``, no ``-ffast-math``), ``-fno-math-errno`` and
libmvec when there is one, the raised alias-check limit, the ISA flags of the running CPU's
variant, then ``extra_cflags``. A debug build: ``-O1 -g``, no OpenMP, the sanitizer traps of
:data:`DEBUG_CFLAGS`, and ``TORCHCLAD_GUARDED`` (faults become errors, capi.h).

A failed build raises :class:`~torchclad.toolchain.BuildError` with the compiler's first error
at the user's file and line (:mod:`torchclad.toolchain.diagnose`); the whole log is kept under
``failed/<key>/``.
"""

from __future__ import annotations

import functools
import shlex
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from . import capi, compiler, isa, store
from .clib import KernelLibrary
from .glue import SUFFIX, calls, scalar_types
from .signature import dumps as signatures_json
from .signature import loads as signatures_load

if TYPE_CHECKING:
    from . import probe

__all__ = ["Recipe", "Built", "key_of", "lookup", "build", "flags", "native_flags", "DEBUG_CFLAGS",
           "ENTRY_FILE"]

_FORMAT = "torchclad-kernel-v1"
#: the file name compiler messages give the C entry points (a #line)
ENTRY_FILE = "torchclad-entry-points.cpp"
#: a debug build traps on these (no sanitizer runtime: the trap is caught by capi.h)
DEBUG_CFLAGS: tuple[str, ...] = (
    "-g", "-fno-omit-frame-pointer", "-DTORCHCLAD_GUARDED",
    "-fsanitize=bounds,signed-integer-overflow,shift,integer-divide-by-zero,vla-bound,return,"
    "unreachable", "-fsanitize-undefined-trap-on-error")
_PKG = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Recipe:
    """What a user kernel's build is made from (besides the toolchain)."""

    source: str
    name: str
    filename: str = "kernel.cpp"
    debug: bool = False
    extra_cflags: tuple = ()


@dataclass(frozen=True)
class Built:
    """A built kernel: ``signature`` (Derivative-like, :class:`~torchclad.toolchain.signature.
    Signature`), the generated ``code``, the loaded ``library`` and the entry directory."""

    key: str
    entry: Path
    signature: Any
    code: str
    library: KernelLibrary
    manifest: dict


@functools.lru_cache(maxsize=None)
def _tree_digest() -> str:
    """What generates and compiles the code: the engine, the toolchain, the runtime headers,
    each file by path, size and modification time (as Python's bytecode cache tells sources
    apart; reading them all would cost a cache hit several ms)."""
    paths = [*sorted((_PKG / "engine").rglob("*.py")), *sorted((_PKG / "toolchain").glob("*.py"))]
    rt = compiler.runtime_include_dir()
    if rt is not None:
        paths += sorted(p for p in rt.rglob("*") if p.is_file())
    items = []
    for p in paths:
        st = p.stat()
        items.append((str(p), f"{st.st_size}:{st.st_mtime_ns}"))
    return store.digest(items)


def _variant() -> str:
    """The ISA variant the running CPU takes (isa.select: torch's CPU capability, capped by
    $TORCHCLAD_CPU_CAPABILITY)."""
    return isa.select(list(isa.VARIANTS))[0]


def key_of(recipe: Recipe, cxx: Sequence[str] | None = None) -> str:
    """The cache key of ``recipe`` (nothing is run: see the module docstring)."""
    version = getattr(sys.modules.get("torchclad"), "__version__", "unknown")
    cxx = list(cxx) if cxx is not None else compiler.compiler()
    return store.digest((
        ("format", _FORMAT), ("source", recipe.source), ("name", recipe.name),
        ("filename", recipe.filename), ("debug", str(bool(recipe.debug))),
        ("cflags", "\0".join(recipe.extra_cflags)), ("compiler", compiler.identity(cxx)),
        ("isa", _variant()), ("tree", _tree_digest()), ("torchclad", version)))


_built: dict[str, Built] = {}
_lock = threading.Lock()


def _library(manifest: dict, entry: Path, sig: Any, debug: bool) -> KernelLibrary:
    libs = manifest["libs"]
    return KernelLibrary([(entry / f, (s,), calls(sig, s)) for s, f in libs.items()],
                         key=manifest["key"], debug=debug)


def _from_manifest(manifest: dict, entry: Path, recipe: Recipe) -> Built:
    sig = signatures_load(manifest["signature"])[recipe.name]
    return Built(manifest["key"], entry, sig, manifest["code"],
                 _library(manifest, entry, sig, recipe.debug), manifest)


def lookup(recipe: Recipe, *, cache_dir: str | Path | None = None) -> Built | None:
    """The built kernel of ``recipe`` if this process or the store has it, else None."""
    key = key_of(recipe)
    with _lock:
        hit = _built.get(key)
        return hit if hit is not None else _find(recipe, key, store.cache_dir(cache_dir))


def _find(recipe: Recipe, key: str, root: Path) -> Built | None:
    """This process's build of ``key``, else the store's valid entry (loaded), else None (the
    caller holds ``_lock``)."""
    hit = _built.get(key)
    if hit is None:
        manifest = store.read_manifest(root / key, key)
        if manifest is not None:
            hit = _built[key] = _from_manifest(manifest, root / key, recipe)
    return hit


def flags(caps: probe.Capabilities, variant: str, *, debug: bool,
          extra_cflags: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """``(compile flags, link flags)`` of a user kernel (see the module docstring)."""
    cflags = [f for f in compiler.CXXFLAGS if not (debug and f in ("-O3", "-fopenmp"))]
    if debug:
        cflags = ["-O1", *cflags, *DEBUG_CFLAGS]
    if caps.vecmath:
        cflags += list(isa.VECMATH_CFLAGS)
    if caps.alias_checks:
        cflags += list(isa.KERNEL_CFLAGS)
    if variant in caps.variants:
        cflags += list(isa.VARIANTS[variant])
    cflags += ["-fdiagnostics-color=never", *extra_cflags]
    ldflags = [f for f in compiler.LDFLAGS if not (debug and f == "-fopenmp")]
    libs = [] if debug else list(compiler.LIBRARIES)
    if caps.vecmath:
        libs += list(isa.VECMATH_LIBS)
    return cflags, [*ldflags, *(f"-l{lib}" for lib in libs)]


def native_flags() -> tuple[str, list[str], list[str]]:
    """What a pybind11 build (:func:`torchclad.toolchain.load` with ``native=True``: the
    forward-mode and second-order derivatives of ops, ``torchclad.differentiate``) adds to
    :mod:`compiler`'s flags to compile like a user kernel: ``(vector-math prelude, compile
    flags, link flags)`` -- libmvec, the alias-check limit and the ISA flags of the running
    CPU's variant, when the compiler offers them."""
    from . import probe

    cxx = compiler.compiler()
    caps = probe.capabilities(cxx, compiler.compiler_version(cxx), _PKG / "_generated",
                              store.cache_dir(None) / "toolchain")
    cflags, ldflags = flags(caps, _variant(), debug=False)
    return (isa.vecmath_prelude(caps.vecmath),
            [f for f in cflags if f not in compiler.CXXFLAGS],
            [f for f in ldflags if f not in compiler.LDFLAGS and
             f not in (f"-l{lib}" for lib in compiler.LIBRARIES)])


def unit_text(derivative: Any, scalar: str, vecmath: Sequence[str]) -> str:
    """The translation unit of ``derivative`` for ``scalar`` (see the module docstring)."""
    return (isa.vecmath_prelude(vecmath) + f"#include <{capi.INCLUDE}>\n"
            + derivative.translation_unit()
            + f'\n#line 1 "{ENTRY_FILE}"\n' + capi.entry_points(derivative, scalar))


def _compile(recipe: Recipe, derivative: Any, tmp: Path, root: Path, key: str) -> dict:
    """Write and compile the unit of every scalar type at once; the manifest (without key and
    files). Raises BuildError worded by :mod:`diagnose`. (:mod:`probe` and :mod:`diagnose`
    are imported here, not at the top: a cache hit never needs them.)"""
    from . import probe

    cxx = compiler.compiler()
    version = compiler.compiler_version(cxx)
    caps = probe.capabilities(cxx, version, _PKG / "_generated", root / "toolchain")
    variant = _variant()
    cflags, ldflags = flags(caps, variant, debug=recipe.debug, extra_cflags=recipe.extra_cflags)
    incs = [f"-I{d}" for d in ([str(compiler.runtime_include_dir())]
                               if compiler.runtime_include_dir() else [])]
    scalars = scalar_types(derivative)
    jobs, libs = [], {}
    for s in scalars:
        stem = f"kernel_{SUFFIX[s]}"
        (tmp / f"{stem}.cpp").write_text(unit_text(derivative, s, caps.vecmath))
        libs[s] = f"{stem}.so"
        jobs.append(([*cxx, *cflags, *incs, f"{stem}.cpp", "-o", libs[s], *ldflags],
                     str(tmp / f"{stem}.cpp")))
    sys.stderr.write(f"torchclad: compiling {recipe.name} ({', '.join(scalars)}; first use, "
                     "cached afterwards)...\n")
    sys.stderr.flush()
    results = compiler.run_many(jobs, cwd=tmp)
    (tmp / "build.log").write_text("".join(
        f"$ {shlex.join(argv)}\n{r.stdout}{r.stderr}\n" for (argv, _), r in zip(jobs, results)))
    bad = [(s, r) for s, r in zip(scalars, results) if r.returncode != 0]
    if bad:
        raise _build_error(recipe, bad, scalars, root / "failed" / key)
    return {"kind": "kernel", "name": recipe.name, "filename": recipe.filename,
            "libs": libs, "signature": signatures_json([(recipe.name, [derivative])]),
            "code": derivative.code, "compiler": version, "variant": variant,
            "cflags": cflags, "ldflags": ldflags, "debug": recipe.debug}


def _build_error(recipe: Recipe, bad: list, scalars: Sequence[str], failed_dir: Path
                 ) -> compiler.BuildError:
    scalar, r = bad[0]
    ok = [s for s in scalars if s not in {s for s, _ in bad}]
    from . import diagnose

    log = failed_dir / "build.log"
    first = diagnose.first_error(r.stderr, recipe.filename)
    msg = diagnose.explain(first, user_file=recipe.filename, function=recipe.name,
                           scalar=scalar if len(scalars) > 1 else "",
                           other_ok=ok[0] if ok else None, log=str(log), source=recipe.source)
    if r.returncode < 0:
        msg += f" (the compiler {compiler.status_text(r.returncode)})"
    e = compiler.BuildError(msg, source=str(failed_dir / f"kernel_{SUFFIX[scalar]}.cpp"),
                            stderr=r.stderr)
    e.log = str(log)  # type: ignore[attr-defined]
    return e


def build(recipe: Recipe, derivative: Any, *, cache_dir: str | Path | None = None,
          lock_timeout: float = store.DEFAULT_LOCK_TIMEOUT) -> Built:
    """Compile ``derivative`` (the engine's, for ``recipe``) once and load it; another process
    building the same key at the same time is waited for."""
    key = key_of(recipe)
    with _lock:
        hit = _built.get(key)
        if hit is not None:
            return hit
        root = store.cache_dir(cache_dir)
        with store.locked(root / "locks" / f"{key}.lock", lock_timeout):
            hit = _find(recipe, key, root)  # built while we waited?
            if hit is None:
                store.build_entry(
                    root, key, lambda tmp: _compile(recipe, derivative, tmp, root, key),
                    lambda m: sorted(m["libs"].values()))
                hit = _find(recipe, key, root)
                if hit is None:
                    raise store.CacheDirError(f"torchclad: the entry {root / key} just built "
                                              "does not validate (was the cache directory "
                                              "changed?)")
        return hit
