"""What the C++ compiler can do for a kernel: vector math, ISA flags, the alias-check limit.

User kernels (``torchclad.function`` / ``gradient``) get what the built-in kernels get
(:mod:`torchclad.toolchain.isa`): the ISA flags of the running CPU, glibc's vector
``exp``/``log``/``tanh``/``erf`` (libmvec) declared without ``-ffast-math``, and the raised
alias-check limit. Whether this compiler and C library offer each of those is found by small
probe programs (:func:`probe`, the probes run in parallel); the answer is

1. the one ``setup.py`` recorded at install time (``torchclad/_generated/toolchain.json``)
   when it was made by the same compiler (same argv, same ``--version`` output), else
2. the one recorded in the JIT cache directory (``toolchain/<digest>.json``), else
3. probed now (a few hundred ms, once per compiler) and recorded there.

A compiler is identified by its argv and ``--version`` output (:func:`identity`), run once per
process.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from . import isa

__all__ = ["Capabilities", "probe", "capabilities", "record", "RECORD_FILE"]

#: the install-time record, in torchclad/_generated/
RECORD_FILE = "toolchain.json"
_FORMAT = "torchclad-toolchain-v2"


@dataclass(frozen=True)
class Capabilities:
    """``vecmath``: the libm functions with a libmvec version this compiler links; ``variants``:
    the ISA variants (isa.VARIANTS) whose flags it accepts; ``alias_checks``: whether it takes
    isa.KERNEL_CFLAGS."""

    cxx: tuple
    version: str
    vecmath: tuple
    variants: tuple
    alias_checks: bool

    def to_json(self) -> str:
        return json.dumps({"format": _FORMAT, **asdict(self)}, indent=1) + "\n"

    @staticmethod
    def from_json(text: str) -> "Capabilities | None":
        try:
            d = json.loads(text)
            if d.pop("format") != _FORMAT:
                return None
            return Capabilities(cxx=tuple(d["cxx"]), version=d["version"],
                                vecmath=tuple(d["vecmath"]), variants=tuple(d["variants"]),
                                alias_checks=bool(d["alias_checks"]))
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


def probe(cxx: Sequence[str], version: str) -> Capabilities:
    """Run the probe programs (in parallel: each is a compiler process). Vector math: one
    program for every function of ``isa.VECMATH_USER``; if it does not link, one per function."""
    cxx = list(cxx)
    fns = [f for dbl, flt in isa.VECMATH_USER for f in (flt, dbl)]
    with ThreadPoolExecutor(max_workers=max(2, min(8, os.cpu_count() or 2))) as pool:
        every = pool.submit(isa.vecmath_all_available, cxx, fns)
        var = {v: pool.submit(isa.supported, cxx, v) for v in isa.VARIANTS}
        alias = pool.submit(isa.accepted, cxx, isa.KERNEL_CFLAGS)
        if every.result():
            vecmath = tuple(fns)
        else:
            vec = {f: pool.submit(isa.vecmath_available, cxx, f) for f in fns}
            vecmath = tuple(f for f in fns if vec[f].result())
        return Capabilities(
            cxx=tuple(cxx), version=version, vecmath=vecmath,
            variants=tuple(v for v in isa.VARIANTS if var[v].result()),
            alias_checks=bool(alias.result()))


def record(path: Path, caps: Capabilities) -> None:
    """Write ``caps`` to ``path`` (atomically: a temporary file renamed over it)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(caps.to_json())
    os.replace(tmp, path)


def _read(path: Path, cxx: Sequence[str], version: str) -> Capabilities | None:
    try:
        caps = Capabilities.from_json(path.read_text())
    except OSError:
        return None
    if caps is None or list(caps.cxx) != list(cxx) or caps.version != version:
        return None
    return caps


@functools.lru_cache(maxsize=None)
def _capabilities(cxx: tuple, version: str, installed: str, cache_root: str) -> Capabilities:
    caps = _read(Path(installed), cxx, version)
    if caps is not None:
        return caps
    digest = hashlib.sha256(json.dumps([list(cxx), version]).encode()).hexdigest()[:32]
    mine = Path(cache_root) / f"{digest}.json"
    caps = _read(mine, cxx, version)
    if caps is None:
        caps = probe(cxx, version)
        record(mine, caps)
    return caps


def capabilities(cxx: Sequence[str], version: str, installed_dir: Path, cache_root: Path
                 ) -> Capabilities:
    """The :class:`Capabilities` of compiler ``cxx`` (memoized per process).

    ``installed_dir``: where setup.py wrote :data:`RECORD_FILE`; ``cache_root``: a private
    directory of the JIT cache for the records made at run time."""
    return _capabilities(tuple(cxx), version, str(Path(installed_dir) / RECORD_FILE),
                         str(cache_root))
