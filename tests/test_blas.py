"""The float GEMMs of the built-in matmul: MKL or numpy's OpenBLAS, chosen once per process at
import (torchclad/builtin/blas.py); either gives torch's results to float32 rounding."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from torchclad.builtin import blas

RUN = textwrap.dedent("""
    import json, os, torch
    torch.set_num_threads(int(os.environ["NT"]))     # the other BLAS runs at one thread only
    import torchclad.nn as tnn
    from torchclad.builtin import blas, loader
    loader.extension()
    torch.manual_seed(0)
    m = tnn.Linear(96, 200)
    ref = torch.nn.Linear(96, 200)
    ref.load_state_dict(m.state_dict())
    x = torch.randn(300, 96, requires_grad=True)
    xr = x.detach().clone().requires_grad_()
    g = torch.randn(300, 200)
    m(x).backward(g)
    ref(xr).backward(g)
    err = max((a - b).abs().max().item() / (b.abs().max().item() + 1e-30) for a, b in
              [(x.grad, xr.grad), (m.weight.grad, ref.weight.grad), (m.bias.grad, ref.bias.grad),
               (m(x), ref(xr))])
    print(json.dumps({"selected": blas.selected(), "err": err}))
""")


def _run(choice: str, threads: int = 1) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHCLAD_SGEMM_LIB",)}
    env["TORCHCLAD_BLAS"] = choice
    env["NT"] = str(threads)
    out = subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True, env=env,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_mkl_when_asked():
    r = _run("mkl")
    assert r["selected"] == "mkl" and r["err"] < 1e-5


def test_openblas_when_asked():
    assert blas.openblas_library() is not None, "numpy's OpenBLAS not found (make install has numpy)"
    for threads in (1, 2):           # at 2 threads the kernels fall back to MKL
        r = _run("openblas", threads)
        assert r["selected"] == "openblas" and r["err"] < 1e-5


def test_auto_picks_by_cpu(monkeypatch):
    monkeypatch.delenv("TORCHCLAD_SGEMM_LIB", raising=False)
    monkeypatch.setenv("TORCHCLAD_BLAS", "auto")
    monkeypatch.setattr(blas, "_vendor", lambda: "GenuineIntel")
    assert blas.choose() == "mkl" and blas.selected() == "mkl"
    monkeypatch.setattr(blas, "_vendor", lambda: "AuthenticAMD")
    want = "openblas" if blas.openblas_library() is not None else "mkl"
    assert blas.choose() == want and blas.selected() == want


def test_bad_choice_is_an_error(monkeypatch):
    monkeypatch.delenv("TORCHCLAD_SGEMM_LIB", raising=False)
    monkeypatch.setenv("TORCHCLAD_BLAS", "atlas")
    with pytest.raises(ValueError, match="TORCHCLAD_BLAS='atlas'.*'mkl', 'openblas' or 'auto'"):
        blas.choose()
