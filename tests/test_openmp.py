"""`#pragma omp parallel for` in kernels: the forward stays parallel where it records nothing
on the shared tape (per-iteration slots instead), and the reverse loop runs in parallel only
where every adjoint access is private to an iteration or a `+=` reduction."""
from __future__ import annotations

import textwrap

import pytest
import torch

from torchclad.engine import differentiate

ELEMENTWISE = textwrap.dedent("""
    #include <cmath>
    template <typename T>
    void act(T* out, const T* inp, int N) {
      #pragma omp parallel for
      for (int i = 0; i < N; i++) { T x = inp[i]; out[i] = x * std::tanh(x); }
    }""")

ROWS = textwrap.dedent("""
    void rows(double* out, const double* inp, const double* w, int B, int C) {
      #pragma omp parallel for
      for (int b = 0; b < B; b++) {
        const double* x = inp + b * C;
        double m = 0;
        for (int i = 0; i < C; i++) m += x[i] * w[i];
        for (int i = 0; i < C; i++) out[b * C + i] = x[i] * m;
      }
    }""")

# every iteration adds into the same scalar parameter's adjoint: the reverse stays serial
SHARED_SCALAR = textwrap.dedent("""
    void scale(double* out, const double* inp, double a, int N) {
      #pragma omp parallel for
      for (int i = 0; i < N; i++) out[i] = a * inp[i] * inp[i];
    }""")

# the body records a loop-carried value inside an inner loop: the forward becomes serial
RECORDING = textwrap.dedent("""
    void prod(double* out, const double* inp, int B, int C) {
      #pragma omp parallel for
      for (int b = 0; b < B; b++) {
        double p = 1;
        for (int i = 0; i < C; i++) p = p * inp[b * C + i];
        out[b] = p;
      }
    }""")


def _sweep(code: str, name: str) -> str:
    return code[code.index(f"{name}_reverse_sweep"):]


def _forw(code: str, name: str) -> str:
    start = code.index(f"{name}_reverse_forw")
    return code[start:code.index(f"{name}_reverse_sweep")]


def test_elementwise_reverse_is_parallel():
    code = differentiate(ELEMENTWISE, "act").code
    assert "#pragma omp parallel for\n" in _forw(code, "act")
    assert "#pragma omp parallel for\n" in _sweep(code, "act")


def test_shared_weights_become_a_reduction():
    code = differentiate(ROWS, "rows", "inp, w").code
    assert "#pragma omp parallel for reduction(+: _d_w[:C])" in _sweep(code, "rows")
    assert "_tape.push(" not in _forw(code, "rows")     # per-row values go to slots
    recording = differentiate(RECORDING, "prod", "inp").code
    assert "_tape.push(" in _forw(recording, "prod")   # (a serial forward does push)


def test_scalar_parameter_adjoint_keeps_reverse_serial():
    code = differentiate(SHARED_SCALAR, "scale", "inp, a").code
    assert "#pragma omp" in _forw(code, "scale")
    assert "#pragma omp" not in _sweep(code, "scale")


def test_recording_inside_keeps_forward_serial():
    code = differentiate(RECORDING, "prod", "inp").code
    assert "#pragma omp" not in code
    assert "_tape.push(" in _forw(code, "prod")        # the recording that keeps it serial
    assert "#pragma omp" in _forw(differentiate(SHARED_SCALAR, "scale", "inp, a").code, "scale")


@pytest.fixture(scope="module")
def mod():
    """One extension for all kernels (one compile), run with 2 OpenMP threads."""
    import os
    from torchclad import toolchain as build
    from torchclad.engine import Engine
    os.environ["OMP_NUM_THREADS"] = "2"
    engine = Engine(ELEMENTWISE + ROWS + RECORDING, "omp.cpp")
    derivs = [engine.derive("act", "inp"), engine.derive("rows", "inp, w"),
              engine.derive("prod", "inp")]
    return build.load(derivs, name="openmp_tests")


@pytest.mark.parametrize("dtype,sfx", [(torch.float32, "f32"), (torch.float64, "f64")])
def test_elementwise_gradient(mod, dtype, sfx):
    x = torch.randn(10_001, dtype=dtype)
    seed = torch.randn_like(x)
    out, dx, dout = torch.zeros_like(x), torch.zeros_like(x), seed.clone()
    mod.__dict__[f"act_pullback_{sfx}"](out.data_ptr(), x.data_ptr(), x.numel(), dx.data_ptr(),
                                       dout.data_ptr())
    xr = x.clone().requires_grad_()
    (xr * torch.tanh(xr)).backward(seed)
    torch.testing.assert_close(dx, xr.grad)


def test_rows_gradient_matches_torch(mod):
    B, C = 37, 9
    d = torch.float64
    inp, w = torch.rand(B * C, dtype=d) + 0.5, torch.randn(C, dtype=d)
    seed = torch.randn(B * C, dtype=d)
    out, dx, dw, dout = (torch.zeros(B * C, dtype=d), torch.zeros(B * C, dtype=d),
                         torch.zeros(C, dtype=d), seed.clone())
    tape = mod.Tape()        # split mode: the parallel forward's slots travel on the tape
    mod.rows_reverse_forw_f64(out.data_ptr(), inp.data_ptr(), w.data_ptr(), B, C, tape)
    mod.rows_reverse_sweep_f64(out.data_ptr(), inp.data_ptr(), w.data_ptr(), B, C,
                               dx.data_ptr(), dw.data_ptr(), dout.data_ptr(), tape)
    assert tape.empty()
    x, ww = inp.clone().requires_grad_(), w.clone().requires_grad_()
    xr = x.view(B, C)
    ((xr * (xr * ww).sum(1, keepdim=True)).reshape(-1)).backward(seed)
    torch.testing.assert_close(dx, x.grad)
    torch.testing.assert_close(dw, ww.grad)


def test_recording_loop_gradient_matches_torch(mod):
    B, C = 37, 9
    d = torch.float64
    inp = torch.rand(B * C, dtype=d) + 0.5
    seed = torch.randn(B, dtype=d)
    out, dx, dout = torch.zeros(B, dtype=d), torch.zeros(B * C, dtype=d), seed.clone()
    mod.prod_pullback_f64(out.data_ptr(), inp.data_ptr(), B, C, dx.data_ptr(), dout.data_ptr())
    x = inp.clone().requires_grad_()
    x.view(B, C).prod(1).backward(seed)
    torch.testing.assert_close(dx, x.grad)
