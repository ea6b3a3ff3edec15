"""The on-disk build store shared by the JIT caches (``cache.py``: pybind11 modules, ``jit.py``:
user kernels): a private directory of entries, each built in a temporary directory and moved
into place with one ``rename``, under a per-key ``flock``.

Layout of the directory (``$TORCHCLAD_CACHE_DIR``, default ``$XDG_CACHE_HOME/torchclad`` or
``~/.cache/torchclad``; every directory 0700 and refused if it is a symlink, not ours, or
writable by group/others)::

    <key>/                  one complete entry; <key>/manifest.json is written last and lists
                            the sha256 of the entry's binaries
    locks/<key>.lock        fcntl.flock per key (never deleted)
    tmp/<key>.*             builds in progress (renamed to <key>/ when done)
    failed/<key>/           the last failed build of <key>, kept for reading
    toolchain/              what the compiler can do (torchclad.toolchain.probe)

An entry is used only if its manifest names its key and every binary's sha256 matches;
anything else is rebuilt. Concurrent builders of one key serialize on the key's lock, and a
builder that dies (even by SIGKILL) releases the lock with its process.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping

__all__ = ["CacheDirError", "LockTimeout", "ENV_CACHE_DIR", "DEFAULT_LOCK_TIMEOUT",
           "default_cache_dir", "cache_dir", "private_dir", "locked", "sha256_file", "digest",
           "remove_tree", "read_manifest", "build_entry", "MANIFEST", "SUBDIRS"]

ENV_CACHE_DIR = "TORCHCLAD_CACHE_DIR"
DEFAULT_LOCK_TIMEOUT = 600.0
MANIFEST = "manifest.json"
SUBDIRS = ("locks", "tmp", "failed", "toolchain")


class CacheDirError(RuntimeError):
    """The cache directory is unsafe (symlink, foreign owner, group/other-writable) or unusable."""


class LockTimeout(TimeoutError):
    """Another process held a build lock for longer than the timeout."""


# ----------------------------------------------------------------------------------------------
# Directory


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


def private_dir(path: Path) -> Path:
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
    private_dir(root)
    for sub in SUBDIRS:
        private_dir(root / sub)
    return root


# ----------------------------------------------------------------------------------------------
# Lock


@contextmanager
def locked(lock_path: Path, timeout: float) -> Iterator[None]:
    """Hold ``flock`` on ``lock_path`` (waiting at most ``timeout`` seconds: LockTimeout)."""
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


def digest(items: Iterable[tuple[str, str]]) -> str:
    """sha256 over labelled values (each framed by its label and length, so that no two
    different lists hash alike)."""
    h = hashlib.sha256()
    for label, value in items:
        data = value.encode()
        h.update(f"{label}:{len(data)}:".encode())
        h.update(data)
    return h.hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_manifest(entry: Path, key: str) -> dict | None:
    """The manifest of a complete, untampered entry: it names ``key`` and the sha256 of every
    file in its ``files`` map matches. None for anything else (missing, partial, planted)."""
    try:
        manifest = json.loads((entry / MANIFEST).read_text())
        files = manifest.get("files")
        if entry.name != key or manifest.get("key") != key or not isinstance(files, dict):
            return None
        for name, digest in files.items():
            if "/" in name or name.startswith(".") or sha256_file(entry / name) != digest:
                return None
        return manifest
    except (OSError, ValueError, AttributeError):
        return None


def remove_tree(path: Path, root: Path) -> None:
    """Move ``path`` aside atomically, then delete it."""
    if not os.path.lexists(path):
        return
    trash = Path(tempfile.mkdtemp(prefix="trash.", dir=root / "tmp"))
    try:
        os.rename(path, trash / "x")
    except OSError:
        pass
    shutil.rmtree(trash, ignore_errors=True)


def build_entry(root: Path, key: str, build: Callable[[Path], Mapping[str, object]],
                binaries: Callable[[Mapping[str, object]], list[str]]) -> Path:
    """Build entry ``key`` in a temporary directory and move it into place as ``root/<key>``
    (the caller holds the key's lock). ``build(tmp)`` writes the files and returns the manifest
    (without ``key`` and ``files``); ``binaries(manifest)`` names the files whose sha256 the
    manifest records. A build that raises is kept under ``failed/<key>`` (its exception gets a
    ``kept`` attribute: that directory) and the exception propagates."""
    entry = root / key
    for stale in (root / "tmp").glob(f"{key}.*"):  # left by a builder that died; we hold the lock
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=root / "tmp"))
    try:
        try:
            manifest = dict(build(tmp))
        except Exception as e:
            kept = root / "failed" / key
            remove_tree(kept, root)
            try:
                os.rename(tmp, kept)
                e.kept = kept  # type: ignore[attr-defined]
            except OSError:
                e.kept = tmp  # type: ignore[attr-defined]
            raise
        manifest = {"key": key, **manifest,
                    "files": {n: sha256_file(tmp / n) for n in binaries(manifest)}}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        remove_tree(entry, root)  # an invalid entry (we only build when it is not valid)
        os.rename(tmp, entry)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return entry
