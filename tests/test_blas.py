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
    torch.set_num_threads(int(os.environ["NT"]))
    import torchclad.nn as tnn
    from torchclad.builtin import blas, loader
    loader.extension()
    torch.manual_seed(0)
    err = 0.0
    # (rows, in, out, bias): 300 x 96 -> 200 splits its forward GEMM over the threads, and its
    # two backward products share them (matmul_gemm_pair: one each at 2 threads, one and one
    # split in two at 3); 17 x 33 -> 5 and 1 x 7 -> 3 stay one call; 64 x 1024 -> 16 has a long
    # k and few columns; 40 x 64 -> 1000 cuts the weight's gradient by rows
    for n, k, o, bias in [(300, 96, 200, True), (17, 33, 5, True), (1, 7, 3, False),
                          (64, 1024, 16, True), (40, 64, 1000, False)]:
        m = tnn.Linear(k, o, bias=bias)
        ref = torch.nn.Linear(k, o, bias=bias)
        ref.load_state_dict(m.state_dict())
        x = torch.randn(n, k, requires_grad=True)
        xr = x.detach().clone().requires_grad_()
        g = torch.randn(n, o)
        y = m(x)
        y.backward(g)
        yr = ref(xr)
        yr.backward(g)
        pairs = [(y, yr), (x.grad, xr.grad), (m.weight.grad, ref.weight.grad)]
        if bias:
            pairs.append((m.bias.grad, ref.bias.grad))
        err = max([err] + [(a - b).abs().max().item() / (b.abs().max().item() + 1e-30)
                           for a, b in pairs])
    # the attention core's products: one GEMM per (batch, head) entry, on one thread of a
    # parallel loop (the same bits at any thread count); T = 80 spans two blocks of rows
    from torchclad.builtin import ops
    qkv = torch.randn(3, 80, 3, 4, 16, requires_grad=True)
    ya = ops.attention(qkv)[0]
    ga = torch.linspace(-1, 1, ya.numel()).reshape(ya.shape)
    ya.backward(ga)
    qr = qkv.detach().clone().requires_grad_()
    q, k, v = (t.transpose(1, 2) for t in qr.unbind(2))
    yr = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    yr = yr.transpose(1, 2).reshape(ya.shape)
    yr.backward(ga)
    for a, b in [(ya, yr), (qkv.grad, qr.grad)]:
        err = max(err, (a - b).abs().max().item() / (b.abs().max().item() + 1e-30))
    bits = [ya.detach().flatten().tolist(), qkv.grad.flatten().tolist()]
    print(json.dumps({"selected": blas.selected(), "err": err, "bits": bits}))
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
    for threads in (1, 2):
        r = _run("mkl", threads)
        assert r["selected"] == "mkl" and r["err"] < 1e-5, r["err"]


def test_openblas_when_asked():
    """OpenBLAS at 1, 2 and 3 threads (with more than one, the large GEMMs are split over the
    OpenMP threads): torch's results to float32 rounding; the attention core's batched products
    give the same bits at every thread count."""
    assert blas.openblas_library() is not None, "numpy's OpenBLAS not found (make install has numpy)"
    runs = [_run("openblas", threads) for threads in (1, 2, 3)]
    for r in runs:
        assert r["selected"] == "openblas" and r["err"] < 1e-5, r["err"]
    assert runs[1]["bits"] == runs[0]["bits"] and runs[2]["bits"] == runs[0]["bits"]


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
