"""torchclad.differentiate / jacobian / hessian (forward mode and forward over reverse, like
Clad's clad::differentiate / clad::jacobian / clad::hessian), in float64 against torch's own
derivatives of the same function and against finite differences."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

import torchclad

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus_harness as H  # noqa: E402

D = torch.float64

SCALAR = r"""
#include <cmath>
double sq(double a) { return a * a; }
double f(double x, double y) {
  double t = std::exp(x * y);
  double s = 0;
  for (int i = 0; i < 3; i++) s += sq(t) * x;
  return s + std::tanh(y) / (1 + x * x);
}
"""


def f_torch(x, y):
    t = torch.exp(x * y)
    return 3 * t * t * x + torch.tanh(y) / (1 + x * x)


ARRAYS = r"""
#include <cmath>
// a loop, a pointer walk, an early return and an OpenMP loop
double energy(const double* x, const double* w, int n) {
  if (n <= 0) return 0.0;
  double e = 0;
  #pragma omp parallel for reduction(+: e)
  for (int i = 0; i < n; i++) e += w[i] * std::sin(x[i]) * x[i];
  const double* p = x;
  for (int i = 0; i + 1 < n; i++, p++) e += p[0] * p[1];
  return e;
}
void field(const double* x, double a, double* out, int n) {
  for (int i = 0; i < n; i++) out[i] = a * std::exp(-x[i] * x[i]) + (i > 0 ? x[i - 1] : 0.0);
}
"""


def energy_torch(x, w):
    return (w * torch.sin(x) * x).sum() + (x[:-1] * x[1:]).sum()


def field_torch(x, a):
    shifted = torch.cat([x.new_zeros(1), x[:-1]])
    return a * torch.exp(-x * x) + shifted


def _t(*vals):
    return torch.tensor(vals, dtype=D)


# ---- differentiate ---------------------------------------------------------------------------

def test_differentiate_scalar_is_f_darg0():
    d = torchclad.differentiate(SCALAR, "f", "x")
    assert "double f_darg0(double x, double y)" in d.source
    x, y = torch.tensor(0.3, dtype=D), torch.tensor(0.7, dtype=D)
    want = torch.func.grad(f_torch, argnums=0)(x, y)
    got = d(0.3, 0.7)
    assert isinstance(got, float)
    assert math.isclose(got, float(want), rel_tol=1e-12)
    dy = torchclad.differentiate(SCALAR, "f", 1)          # by index, like Clad's "1"
    assert "f_darg1" in dy.source
    assert math.isclose(dy(0.3, 0.7), float(torch.func.grad(f_torch, argnums=1)(x, y)),
                        rel_tol=1e-12)


def test_differentiate_array_element_whole_array_and_direction():
    x, w = torch.rand(5, dtype=D) + 0.1, torch.rand(5, dtype=D)
    g = torch.func.grad(energy_torch)(x, w)
    d = torchclad.differentiate(ARRAYS, "energy", "x[2]")
    assert math.isclose(d(x, w, 5), float(g[2]), rel_tol=1e-12)
    whole = torchclad.differentiate(ARRAYS, "energy", "x")
    assert torch.allclose(whole(x, w, 5), g, rtol=1e-12, atol=0)
    v = torch.rand(5, dtype=D)
    assert math.isclose(whole(x, w, 5, tangent=v), float(g @ v), rel_tol=1e-12)
    assert torch.count_nonzero(whole(x, w, 0)) == 0            # the early return


def test_differentiate_void_returns_the_outputs_tangents():
    x = torch.rand(4, dtype=D)
    d = torchclad.differentiate(ARRAYS, "field", "a")
    out = torch.zeros(4, dtype=D)
    got = d(x, 1.3, out, 4)
    assert torch.allclose(got, torch.exp(-x * x), rtol=1e-13)
    assert torch.count_nonzero(out) == 0                  # inputs (and outputs) untouched


def test_differentiate_errors_say_what_to_do():
    with pytest.raises(ValueError, match="one parameter"):
        torchclad.differentiate(SCALAR, "f", "x, y")
    with pytest.raises(ValueError, match="indexes a scalar"):
        torchclad.differentiate(SCALAR, "f", "x[0]")
    d = torchclad.differentiate(ARRAYS, "energy", "x[9]")
    with pytest.raises(IndexError, match="out of range"):
        d(torch.rand(3, dtype=D), torch.rand(3, dtype=D), 3)
    field = torchclad.differentiate(ARRAYS, "field", "x")
    with pytest.raises(TypeError, match="torchclad.jacobian"):
        field(torch.rand(3, dtype=D), 1.0, torch.zeros(3, dtype=D), 3)
    from torchclad.engine import DiffError
    with pytest.raises(DiffError, match=r"kernel.cpp:\d+:\d+: no derivative for call to "
                                        r"'mystery'.*mystery_pushforward"):
        torchclad.differentiate("double mystery(double);\ndouble g(double x) "
                                "{ return mystery(x); }", "g", "x")


# ---- jacobian --------------------------------------------------------------------------------

def test_jacobian_of_a_void_kernel_matches_torch():
    x = torch.rand(4, dtype=D)
    J = torchclad.jacobian(ARRAYS, "field", "x, a")(x, 1.3, torch.zeros(4, dtype=D), 4)
    jx, ja = torch.autograd.functional.jacobian(field_torch, (x, torch.tensor(1.3, dtype=D)))
    assert J.shape == (4, 5)
    assert torch.allclose(J, torch.cat([jx, ja.reshape(4, 1)], dim=1), rtol=1e-12, atol=1e-15)


def test_jacobian_default_wrt_leaves_out_the_outputs():
    x = torch.rand(3, dtype=D)
    J = torchclad.jacobian(ARRAYS, "field")(x, 0.5, torch.zeros(3, dtype=D), 3)
    assert J.shape == (3, 4)


def test_jacobian_of_a_scalar_function_is_its_gradient_row():
    J = torchclad.jacobian(SCALAR, "f", "y, x")(0.3, 0.7)
    x, y = torch.tensor(0.3, dtype=D), torch.tensor(0.7, dtype=D)
    gy, gx = torch.func.grad(f_torch, argnums=(1, 0))(x, y)
    assert torch.allclose(J, torch.stack([gy, gx]).reshape(1, 2), rtol=1e-12)


def test_jacobian_float32_template():
    src = ("#include <cmath>\ntemplate <typename T> void sq(const T* x, T* y, int n) "
           "{ for (int i = 0; i < n; i++) y[i] = std::tanh(x[i]) * x[i]; }")
    x = torch.rand(3)
    J = torchclad.jacobian(src, "sq", "x")(x, torch.zeros(3), 3)
    assert J.dtype == torch.float32
    want = torch.autograd.functional.jacobian(lambda v: torch.tanh(v) * v, x)
    assert torch.allclose(J, want, rtol=1e-5, atol=1e-6)


def test_jacobian_of_the_builtin_gelu_source():
    src = (H.REPO / "csrc" / "kernels" / "gelu.cpp").read_text()
    x = torch.randn(6, dtype=D)
    J = torchclad.jacobian(src, "gelu_forward", "inp")(torch.zeros(6, dtype=D), x, 6)
    want = torch.autograd.functional.jacobian(
        lambda v: torch.nn.functional.gelu(v, approximate="tanh"), x)
    assert torch.allclose(J, want, rtol=1e-12, atol=1e-14)


# ---- hessian ---------------------------------------------------------------------------------

def test_hessian_by_forward_over_reverse():
    h = torchclad.hessian(SCALAR, "f", "x, y")
    assert "f_pullback_pushforward" in h.source
    H_ = h(0.3, 0.7)
    x, y = torch.tensor(0.3, dtype=D), torch.tensor(0.7, dtype=D)
    want = torch.autograd.functional.hessian(lambda a, b: f_torch(a, b), (x, y))
    want = torch.tensor([[float(want[0][0]), float(want[0][1])],
                         [float(want[1][0]), float(want[1][1])]], dtype=D)
    assert torch.allclose(H_, want, rtol=1e-11)


def test_hessian_of_arrays_with_an_openmp_loop_and_early_return():
    x, w = torch.rand(5, dtype=D) + 0.1, torch.rand(5, dtype=D)
    H_ = torchclad.hessian(ARRAYS, "energy", "x, w")(x, w, 5)
    hx = torch.autograd.functional.hessian(lambda a, b: energy_torch(a, b), (x, w))
    want = torch.cat([torch.cat([hx[0][0], hx[0][1]], 1), torch.cat([hx[1][0], hx[1][1]], 1)])
    assert H_.shape == (10, 10)
    assert torch.allclose(H_, want, rtol=1e-11, atol=1e-13)
    assert torch.count_nonzero(torchclad.hessian(ARRAYS, "energy", "x")(x, w, 0)) == 0


def test_hessian_agrees_with_finite_differences_of_the_gradient():
    x, w = torch.rand(4, dtype=D) + 0.2, torch.rand(4, dtype=D)
    H_ = torchclad.hessian(ARRAYS, "energy", "x")(x, w, 4)
    g = torchclad.gradient(ARRAYS, "energy", "x")
    h = 1e-6
    cols = []
    for j in range(4):
        e = torch.zeros(4, dtype=D)
        e[j] = h
        cols.append((g(x + e, w, 4)[0] - g(x - e, w, 4)[0]) / (2 * h))
    assert torch.allclose(H_, torch.stack(cols, 1), rtol=1e-6, atol=1e-8)


def test_hessian_through_a_custom_derivative():
    case = H.CASES_BY_NAME["custom_pushforward_opaque"]
    src = (H.KERNELS / case.file).read_text()
    x, y = 0.8, 1.1
    H_ = torchclad.hessian(src, "custom_pushforward_opaque")(x, y)
    # f = clampish(x) y + clampish(-y) = x^3 y - y  (x > 0, y > 0)
    want = torch.tensor([[6 * x * y, 3 * x * x], [3 * x * x, 0.0]], dtype=D)
    assert torch.allclose(H_, want, rtol=1e-13)


def test_hessian_refuses_a_void_function():
    with pytest.raises(TypeError, match="returning one floating value"):
        torchclad.hessian(ARRAYS, "field", "x")
