"""matmul_gemm_pair (csrc/kernels/matmul.cpp), the d input and d weight products of a matmul
pullback sharing the OpenMP threads: right results, and products that touch the same memory
run one after the other. A C++ check (gemm_pair_check.cpp) on numpy's OpenBLAS at 2 and 3
threads."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from torchclad.builtin import blas

HERE = Path(__file__).resolve().parent
CXX = os.environ.get("CXX", "g++")


@pytest.fixture(scope="module")
def check(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gemm_pair") / "gemm_pair_check"
    cmd = [CXX, "-std=c++17", "-O2", "-fopenmp", "-Wall", "-Werror", str(HERE / "gemm_pair_check.cpp"),
           "-o", str(out), "-ldl"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.mark.parametrize("threads", [2, 3])
def test_pair_matches_reference_and_keeps_shared_memory_serial(check, threads):
    lib = blas.openblas_library()
    assert lib is not None, "numpy's OpenBLAS not found (make install has numpy)"
    env = dict(os.environ, TORCHCLAD_SGEMM_LIB=lib, OMP_NUM_THREADS=str(threads))
    proc = subprocess.run([str(check)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("OK"), proc.stdout + proc.stderr
