"""Compiler invocation shared by the JIT cache and the AOT build of ``torchclad._C``.

One set of flags for both: ``-O3 -std=c++17 -fPIC -fvisibility=hidden -fno-fast-math -fopenmp
-fno-wrapv``,
linked with ``-fopenmp -lgomp``. Never ``-ffast-math`` (derivatives are checked to the last
bits against each other), never ``-march=native``. The compiler is ``$CXX`` (split like a shell
word list) or ``g++``; it is always run from an argv list, never through a shell.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import signal
import subprocess
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

__all__ = [
    "BuildError",
    "CXXFLAGS",
    "LDFLAGS",
    "LIBRARIES",
    "compiler",
    "compiler_version",
    "include_dirs",
    "runtime_include_dir",
    "python_include_dirs",
    "ext_suffix",
    "command",
    "run_compiler",
    "run_many",
    "status_text",
    "identity",
    "external_library",
]

CXXFLAGS: tuple[str, ...] = (
    "-O3",
    "-std=c++17",
    "-fPIC",
    "-fvisibility=hidden",
    "-fno-fast-math",
    "-fopenmp",
    # setuptools puts Python's own CFLAGS first, and they say -fwrapv: signed overflow then
    # wraps, so g++ may no longer treat the kernels' int index arithmetic (`int i = _ib0 + _j0`,
    # `v - inp + i`) as affine, and vectorises less. Measured: the attention sweep 2.4x slower
    # with it (benchmarks/results.md). Standard C++ semantics, as the kernels are written for.
    "-fno-wrapv",
)
LDFLAGS: tuple[str, ...] = ("-shared", "-fopenmp")
LIBRARIES: tuple[str, ...] = ("gomp",)

_PKG = Path(__file__).resolve().parent.parent  # .../torchclad


def _torch_lib_dir() -> Path:
    """torch's ``lib/`` directory, found without importing torch (setup.py runs this)."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise BuildError("torchclad: torch is not installed; the built-in kernels link against "
                         "its libtorch_cpu.so (BLAS). Install torch first (make install does).")
    return Path(next(iter(spec.submodule_search_locations))) / "lib"


# Libraries a built-in kernel may ask for (KernelSpec.libraries): name -> (directory, -l name).
_EXTERNAL = {
    # sgemm_ / dgemm_ (MKL) behind matmul_forward and its custom derivative
    "torch_cpu": lambda: (_torch_lib_dir(), "torch_cpu"),
}


def external_library(name: str) -> tuple[str, str]:
    """``(directory, library)`` to link ``name`` with: ``-L<dir> -l<library> -Wl,-rpath,<dir>``."""
    try:
        where = _EXTERNAL[name]
    except KeyError:
        raise BuildError(f"torchclad: unknown external library {name!r} in KernelSpec.libraries "
                         f"(known: {', '.join(sorted(_EXTERNAL))})") from None
    d, lib = where()
    if not any(Path(d).glob(f"lib{lib}.*")):
        raise BuildError(f"torchclad: lib{lib} not found in {d} (needed for {name!r})")
    return str(d), lib


class BuildError(RuntimeError):
    """The C++ compiler failed; the message carries its stderr and where the source was kept."""

    def __init__(self, message: str, *, source: str | None = None, stderr: str = ""):
        super().__init__(message)
        self.source = source
        self.stderr = stderr


def compiler() -> list[str]:
    """The C++ compiler argv prefix: ``$CXX`` (shell-split) or ``["g++"]``."""
    cxx = os.environ.get("CXX", "").strip()
    return shlex.split(cxx) if cxx else ["g++"]


@functools.lru_cache(maxsize=None)
def _version_of(cxx: tuple[str, ...]) -> str:
    try:
        r = subprocess.run(
            [*cxx, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, check=False,
        )
    except OSError as e:
        raise BuildError(
            f"torchclad: cannot run the C++ compiler {shlex.join(cxx)!r}: {e}. "
            "Install g++ or point $CXX at a C++17 compiler."
        ) from None
    if r.returncode != 0:
        raise BuildError(
            f"torchclad: `{shlex.join([*cxx, '--version'])}` exited with status {r.returncode}:\n"
            f"{r.stdout}"
        )
    return r.stdout


def compiler_version(cxx: Sequence[str] | None = None) -> str:
    """Output of ``<cxx> --version`` (memoized per process)."""
    return _version_of(tuple(cxx if cxx is not None else compiler()))


def runtime_include_dir() -> Path | None:
    """Directory holding ``torchclad/runtime.h`` (and ``tape.h``, ``math.h``).

    From a source tree / editable install: ``csrc/runtime``. From a wheel: the headers copied
    into the package at build time, ``torchclad/include``.
    """
    tree = _PKG.parent / "csrc" / "runtime"
    if (tree / "torchclad").is_dir():
        return tree
    bundled = _PKG / "include"
    if (bundled / "torchclad").is_dir():
        return bundled
    return None


def python_include_dirs() -> list[str]:
    import pybind11  # cheap; only the header location is needed

    dirs = [pybind11.get_include()]
    paths = sysconfig.get_paths()
    for k in ("include", "platinclude"):
        if paths.get(k) and paths[k] not in dirs:
            dirs.append(paths[k])
    return dirs


def include_dirs() -> list[str]:
    """Include directories of the generated code: the torchclad runtime, pybind11, Python."""
    rt = runtime_include_dir()
    return ([str(rt)] if rt is not None else []) + python_include_dirs()


def ext_suffix() -> str:
    return sysconfig.get_config_var("EXT_SUFFIX") or ".so"


def command(
    source: str,
    output: str,
    *,
    extra_cflags: Sequence[str] = (),
    extra_ldflags: Sequence[str] = (),
    extra_include_dirs: Sequence[str] = (),
    cxx: Sequence[str] | None = None,
) -> list[str]:
    """The argv that compiles and links ``source`` into the extension ``output``."""
    incs = [*map(str, extra_include_dirs), *include_dirs()]
    return [
        *(cxx if cxx is not None else compiler()),
        *CXXFLAGS,
        *extra_cflags,
        *(f"-I{d}" for d in incs),
        source,
        "-o",
        output,
        *LDFLAGS,
        *extra_ldflags,
        *(f"-l{lib}" for lib in LIBRARIES),
    ]


def identity(cxx: Sequence[str]) -> str:
    """The compiler without running it: its argv and the resolved path, size and modification
    time of the executable (a JIT cache hit must not spend the ~10 ms of ``--version`` in a
    process that has torch loaded). Raises :class:`BuildError` if it cannot be found."""
    exe = shutil.which(cxx[0]) if cxx else None
    if exe is None:
        raise BuildError(f"torchclad: cannot find the C++ compiler {shlex.join(cxx)!r}; "
                         "install g++ or point $CXX at a C++17 compiler")
    real = os.path.realpath(exe)
    st = os.stat(real)
    return "\0".join([*cxx, real, str(st.st_size), str(st.st_mtime_ns)])


def _spawn(argv: Sequence[str], cwd: str | os.PathLike, source: str) -> subprocess.Popen:
    """The compiler in a session of its own (its own process group, so that it can be stopped
    as a group), without inheriting any of our file descriptors (the build lock stays ours)."""
    try:
        return subprocess.Popen(
            list(argv), cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True,
        )
    except OSError as e:
        raise BuildError(
            f"torchclad: cannot run the C++ compiler {argv[0]!r}: {e}. Install g++ or set $CXX.",
            source=source,
        ) from None


def _kill(procs: Sequence[subprocess.Popen]) -> None:
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()


def run_many(jobs: Sequence[tuple[Sequence[str], str]], *, cwd: str | os.PathLike
             ) -> list[subprocess.CompletedProcess]:
    """Run several compiler commands ``(argv, source)`` at once and wait for all of them (an
    interrupt stops every one); the results in order, failures included (nothing raised for a
    non-zero status)."""
    procs: list[subprocess.Popen] = []
    try:
        for argv, source in jobs:
            procs.append(_spawn(argv, cwd, source))
        with ThreadPoolExecutor(max_workers=max(1, len(procs))) as pool:
            outs = list(pool.map(lambda p: p.communicate(), procs))
    except BaseException:  # e.g. KeyboardInterrupt: stop the drivers and cc1plus & co.
        _kill(procs)
        raise
    return [subprocess.CompletedProcess(p.args, p.returncode, o, e)
            for p, (o, e) in zip(procs, outs)]


def status_text(returncode: int) -> str:
    """``exited with status 1`` / ``was killed by signal 9``."""
    return (f"was killed by signal {-returncode}" if returncode < 0
            else f"exited with status {returncode}")


def run_compiler(argv: Sequence[str], *, cwd: str | os.PathLike, source: str, log: str | None = None) -> None:
    """Run ``argv``; raise :class:`BuildError` with the compiler's stderr on failure.

    The compiler runs in a session of its own (its own process group), so it can be stopped as
    a group, and without inheriting any of our file descriptors (the build lock stays ours).
    """
    proc = _spawn(argv, cwd, source)
    try:
        out, err = proc.communicate()
    except BaseException:  # e.g. KeyboardInterrupt: stop the driver and cc1plus & co.
        _kill([proc])
        raise
    r = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    if log is not None:
        Path(log).write_text(f"$ {shlex.join(argv)}\n{r.stdout}{r.stderr}")
    if r.returncode != 0:
        raise BuildError(
            f"torchclad: the C++ compiler {status_text(r.returncode)} while building {source}\n"
            f"command: {shlex.join(argv)}\n"
            f"source kept at: {source}\n"
            f"--- compiler stderr ---\n{r.stderr.rstrip()}",
            source=source,
            stderr=r.stderr,
        )
