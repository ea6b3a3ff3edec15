"""JIT build of generated derivatives with an on-disk cache.

Layout of the cache directory (``$TORCHCLAD_CACHE_DIR``, default ``$XDG_CACHE_HOME/torchclad``
or ``~/.cache/torchclad``; every directory 0700 and refused if it is a symlink, not ours, or
writable by group/others)::

    <key>/source.cpp        the compiled source: translation unit + pybind11 glue
    <key>/<module><EXT>     the extension
    <key>/build.log         compiler command and output
    <key>/manifest.json     {key, module, so, sha256}; written last
    locks/<key>.lock        fcntl.flock per key (never deleted)
    tmp/<key>.*             builds in progress (renamed to <key>/ when done)
    failed/<key>/           the last failed build of <key>, kept for reading

``key`` = sha256 over the translation unit, the glue, the compiler argv and ``--version``
output, the torchclad runtime headers, and the torch, Python and torchclad versions. An entry is
used only if its manifest names its key and the extension's sha256 matches; anything else is
rebuilt. Builds happen in a temporary directory inside the cache dir and are moved into place
with one ``rename``; concurrent builders of one key serialize on the key's lock, and a builder
that dies (even by SIGKILL) releases the lock with its process.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import shutil
import stat
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator, Sequence

from . import compiler as _cc
from .glue import TranslationUnit, jit_glue, make_tu

__all__ = [
    "CacheDirError",
    "LockTimeout",
    "cache_dir",
    "default_cache_dir",
    "load",
    "plan",
    "BuildPlan",
    "key_for",
]

ENV_CACHE_DIR = "TORCHCLAD_CACHE_DIR"
DEFAULT_LOCK_TIMEOUT = 600.0
_FORMAT = "torchclad-jit-cache-v1"


class CacheDirError(RuntimeError):
    """The cache directory is unsafe (symlink, foreign owner, group/other-writable) or unusable."""


class LockTimeout(TimeoutError):
    """Another process held a build lock for longer than the timeout."""


# ----------------------------------------------------------------------------------------------
# Cache directory


def default_cache_dir() -> Path:
    env = os.environ.get(ENV_CACHE_DIR)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "torchclad"


def _check_private_dir(path: Path, st: os.stat_result) -> None:
    hint = f"set {ENV_CACHE_DIR} to a directory of your own"
    if stat.S_ISLNK(st.st_mode):
        raise CacheDirError(
            f"torchclad: cache directory {path} is a symlink; refusing to use it ({hint})"
        )
    if not stat.S_ISDIR(st.st_mode):
        raise CacheDirError(f"torchclad: cache directory {path} exists and is not a directory ({hint})")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise CacheDirError(
            f"torchclad: cache directory {path} is owned by uid {st.st_uid}, not by you "
            f"(uid {os.getuid()}); refusing to load code from it ({hint})"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o022:
        raise CacheDirError(
            f"torchclad: cache directory {path} is writable by group/others (mode {mode:04o}); "
            f"refusing to load code from it. Run `chmod 700 {path}` or {hint}"
        )


def _private_dir(path: Path) -> Path:
    """Create ``path`` as 0700 if missing (parents as usual), then check it."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(path, 0o700)
            os.chmod(path, 0o700)  # the umask may have taken bits away; never added any
        except FileExistsError:
            pass
        st = os.lstat(path)
    _check_private_dir(path, st)
    return path


def cache_dir(path: str | os.PathLike | None = None) -> Path:
    """The validated cache directory (created 0700 if missing)."""
    root = Path(os.path.abspath(Path(path).expanduser() if path is not None else default_cache_dir()))
    _private_dir(root)
    for sub in ("locks", "tmp", "failed"):
        _private_dir(root / sub)
    return root


_validated_root = cache_dir  # ``load`` has a parameter of the same name


# ----------------------------------------------------------------------------------------------
# Key


@functools.lru_cache(maxsize=None)
def _versions() -> tuple[str, str, str]:
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


def _runtime_digest() -> str:
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
    torch_v, py_v, tc_v = _versions()
    h = hashlib.sha256()
    for label, value in (
        ("format", _FORMAT),
        ("tu", tu_text),
        ("glue", glue_text),
        ("argv", "\0".join(argv)),
        ("compiler", compiler_version),
        ("runtime", _runtime_digest()),
        ("torch", torch_v),
        ("python", py_v),
        ("torchclad", tc_v),
    ):
        data = value.encode()
        h.update(f"{label}:{len(data)}:".encode())
        h.update(data)
    return h.hexdigest()


# ----------------------------------------------------------------------------------------------
# Lock


@contextmanager
def _locked(lock_path: Path, timeout: float) -> Iterator[None]:
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        deadline = time.monotonic() + timeout
        delay = 0.01
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
            if time.monotonic() >= deadline:
                try:
                    holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
                except OSError:
                    holder = "unknown"
                raise LockTimeout(
                    f"torchclad: timed out after {timeout:g} s waiting for the build lock "
                    f"{lock_path} (held by pid {holder}, which is still compiling this kernel). "
                    "Wait for it to finish or stop it; a lock of a dead process is released "
                    "automatically."
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the flock


# ----------------------------------------------------------------------------------------------
# Entries


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _valid_entry(entry: Path, key: str, so_name: str) -> Path | None:
    """The extension of a complete, untampered entry, else None."""
    try:
        manifest = json.loads((entry / "manifest.json").read_text())
        so = entry / so_name
        if (
            entry.name == key
            and manifest.get("key") == key
            and manifest.get("so") == so_name
            and _sha256_file(so) == manifest.get("sha256")
        ):
            return so
    except (OSError, ValueError, AttributeError):
        pass
    return None


def _remove_tree(path: Path, root: Path) -> None:
    """Move ``path`` aside atomically, then delete it."""
    if not os.path.lexists(path):
        return
    trash = Path(tempfile.mkdtemp(prefix="trash.", dir=root / "tmp"))
    try:
        os.rename(path, trash / "x")
    except OSError:
        pass
    shutil.rmtree(trash, ignore_errors=True)


def _compile_entry(p: "BuildPlan", root: Path) -> Path:
    """Compile ``p`` in a temporary directory and move it into place as ``root/<key>``
    (the caller holds the key's lock); a failed build is kept under ``failed/<key>``."""
    key, so_name = p.key, p.so_name
    entry = root / key
    for stale in (root / "tmp").glob(f"{key}.*"):  # left by a builder that died; we hold the lock
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=root / "tmp"))
    try:
        src = tmp / "source.cpp"
        src.write_text(p.source)
        sys.stderr.write(f"torchclad: compiling {p.tu.name} (first use, cached afterwards)...\n")
        sys.stderr.flush()
        try:
            _cc.run_compiler(p.argv(str(src), str(tmp / so_name)), cwd=tmp,
                             source=str(src), log=str(tmp / "build.log"))
        except _cc.BuildError as e:
            kept = root / "failed" / key
            _remove_tree(kept, root)
            try:
                os.rename(tmp, kept)
                where = kept / "source.cpp"
            except OSError:
                where = src
            e.source = str(where)
            e.args = (str(e.args[0]).replace(str(src), str(where)),)
            raise
        manifest = {"key": key, "module": p.module, "so": so_name,
                    "sha256": _sha256_file(tmp / so_name), "name": p.tu.name}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        _remove_tree(entry, root)  # an invalid entry (we only build when it is not valid)
        os.rename(tmp, entry)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return entry / so_name


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
) -> BuildPlan:
    """Module name, glue and cache key of a build, without building (arguments as :func:`load`)."""
    tu = make_tu(derivs_or_tu, name=name)
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
) -> ModuleType:
    """Compile (once) and import the pybind11 module of one translation unit.

    ``derivs_or_tu``: a Derivative, a sequence of Derivatives of one source, or a
    :class:`~torchclad.toolchain.glue.TranslationUnit`. ``extra_cflags`` (e.g. ``["-O0"]``) come
    after the default flags; ``extra_include_dirs`` before the default include directories.
    The module has the bindings described in :mod:`torchclad.toolchain.glue`, plus
    ``__torchclad_key__`` and ``__torchclad_source__`` (the path of the compiled source).
    Raises :class:`~torchclad.toolchain.BuildError` (with the compiler's stderr and the kept
    source), :class:`CacheDirError`, :class:`LockTimeout`.
    """
    p = plan(derivs_or_tu, name=name, extra_cflags=extra_cflags, extra_ldflags=extra_ldflags,
             extra_include_dirs=extra_include_dirs)
    with _loaded_lock:
        if p.key in _loaded:
            return _loaded[p.key]
        root = _validated_root(cache_dir)
        entry = root / p.key
        so = _valid_entry(entry, p.key, p.so_name)
        if so is None:
            with _locked(root / "locks" / f"{p.key}.lock", lock_timeout):
                so = _valid_entry(entry, p.key, p.so_name)  # built while we waited?
                if so is None:
                    so = _compile_entry(p, root)
        mod = _import_so(p.module, so)
        mod.__torchclad_key__ = p.key
        mod.__torchclad_source__ = str(entry / "source.cpp")
        _loaded[p.key] = mod
        return mod
