"""Which BLAS the built-in matmul's float GEMMs call, chosen once per process at import.

The matmul custom derivative (csrc/custom/matmul.cpp) and the forward call ``sgemm`` through
``matmul_gemm`` (csrc/kernels/matmul.cpp): MKL's, the one inside libtorch_cpu, unless
``TORCHCLAD_SGEMM_LIB`` names a library exporting an ILP64 Fortran sgemm, which the kernels
then load on their first call. :func:`choose` sets it from the CPU: on AMD processors numpy's
bundled OpenBLAS measured faster than MKL at the GEMM shapes of the benchmarked models
(benchmarks/bench_blas.py, section "blas" of benchmarks/results.md: MKL's kernels are tuned for
Intel processors); elsewhere, or without numpy's OpenBLAS, MKL stays.

That library always runs single-threaded: its own thread pool would compete for the cores with
the OpenMP threads of torch and of the kernels (the fused GPT-2 at 2 threads measured 2x slower
with it). With more than one OpenMP thread (``torch.set_num_threads``), a large GEMM is cut into
blocks of its output, one single-threaded call per OpenMP thread (``matmul_gemm_split`` in
csrc/kernels/matmul.cpp); a batch entry of attention's products, run on one thread of a
parallel loop, is one call, so its bits do not depend on the thread count.

``TORCHCLAD_BLAS`` overrides the choice: ``mkl``, ``openblas`` or ``auto`` (the default).
float64 GEMMs always use MKL. The choice is fixed once a kernel has run (the kernels read the
variable on their first GEMM).
"""
from __future__ import annotations

import glob
import os
from pathlib import Path

__all__ = ["auto_choice", "choose", "selected", "openblas_library"]

_ENV = "TORCHCLAD_SGEMM_LIB"
_CHOICE = "TORCHCLAD_BLAS"


def openblas_library() -> "str | None":
    """numpy's bundled OpenBLAS (numpy.libs/libscipy_openblas64_*.so), if there is one."""
    try:
        import numpy
    except ImportError:
        return None
    libs = Path(numpy.__file__).resolve().parent.parent / "numpy.libs"
    found = sorted(glob.glob(str(libs / "libscipy_openblas64_*.so*")))
    return found[0] if found else None


def _vendor() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def auto_choice() -> str:
    """What ``TORCHCLAD_BLAS=auto`` picks on this machine (nothing is set): ``"openblas"`` on
    an AMD processor with numpy's OpenBLAS installed, else ``"mkl"``."""
    return "openblas" if _vendor() == "AuthenticAMD" and openblas_library() else "mkl"


def choose() -> str:
    """Set the float GEMM library for this process (see the module docstring); returns
    ``"mkl"`` or ``"openblas"``."""
    if os.environ.get(_ENV):
        return "openblas"                      # set by the caller (or an earlier choose())
    want = os.environ.get(_CHOICE, "auto").strip().lower()
    if want not in ("auto", "mkl", "openblas"):
        raise ValueError(f"{_CHOICE}={want!r}: expected 'mkl', 'openblas' or 'auto'")
    if want == "auto":
        want = auto_choice()
    if want == "mkl":
        return "mkl"
    lib = openblas_library()
    if lib is None:
        raise RuntimeError(f"{_CHOICE}=openblas, but numpy's OpenBLAS (numpy.libs/"
                           "libscipy_openblas64_*.so) is not installed; pip install numpy")
    os.environ[_ENV] = lib
    return "openblas"


def selected() -> str:
    """The library the float GEMMs use in this process: ``"mkl"`` or ``"openblas"``."""
    return "openblas" if os.environ.get(_ENV) else "mkl"
