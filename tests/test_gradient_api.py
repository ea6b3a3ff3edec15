"""torchclad.gradient: the pinned API (README, docs/internals.md), run on generated code.

Each distinct (source, function, wrt) is one JIT compile, so kernels are built once per module.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import torchclad

POLY = r"""
#include <cmath>
double poly(double x, double y) { return x * x * y + std::sin(x); }
"""

DOT = r"""
double dot(const double* a, const double* b, int n) {
  double s = 0.0;
  for (int i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}
"""

SQUARE_SCALE = r"""
void square_scale(double* out, const double* x, double a, int n) {
  for (int i = 0; i < n; i++) out[i] = a * x[i] * x[i];
}
"""

SUMSQ = r"""
template <typename T>
T sumsq(const T* x, int n) {
  T s = 0;
  for (int i = 0; i < n; i++) s += x[i] * x[i];
  return s;
}
"""

GATHER = r"""
double gather(const double* x, const int* idx, int n) {
  double s = 0.0;
  for (int i = 0; i < n; i++) s += x[idx[i]] * x[idx[i]];
  return s;
}
"""


@pytest.fixture(scope="module")
def g_poly():
    return torchclad.gradient(POLY, "poly")


@pytest.fixture(scope="module")
def g_dot():
    return torchclad.gradient(DOT, "dot")


@pytest.fixture(scope="module")
def g_square_scale():
    return torchclad.gradient(SQUARE_SCALE, "square_scale")


@pytest.fixture(scope="module")
def g_sumsq():
    return torchclad.gradient(SUMSQ, "sumsq")


# ---- scalars


def test_scalar_gradient_seed_one(g_poly):
    dx, dy = g_poly(2.0, 3.0)
    assert isinstance(dx, float) and isinstance(dy, float)
    assert dx == pytest.approx(2 * 2.0 * 3.0 + math.cos(2.0), rel=1e-12)
    assert dy == pytest.approx(2.0 * 2.0, rel=1e-12)


def test_scalar_accepts_ints_numpy_and_0dim_tensors(g_poly):
    ref = g_poly(2.0, 3.0)
    assert g_poly(2, 3) == pytest.approx(ref)
    assert g_poly(np.float64(2.0), torch.tensor(3.0, dtype=torch.float64)) == pytest.approx(ref)


def test_wrt_subset_order_and_indices(g_poly):
    x, y = 0.7, -1.3
    full = dict(zip(("x", "y"), g_poly(x, y)))
    g_y = torchclad.gradient(POLY, "poly", wrt="y")
    assert g_y.wrt == ("y",)
    (dy,) = g_y(x, y)
    assert dy == pytest.approx(full["y"], rel=1e-12)
    g_yx = torchclad.gradient(POLY, "poly", wrt=["y", "x"])
    assert g_yx(x, y) == pytest.approx((full["y"], full["x"]), rel=1e-12)


def test_source_is_generated_code_and_dump_prints_it(g_poly, capsys):
    assert "poly_pullback" in g_poly.source
    assert "_d_x" in g_poly.source
    g_poly.dump()
    assert g_poly.source.strip() in capsys.readouterr().out


# ---- arrays, non-void


def test_dot_gradients_are_tensors_of_input_shape(g_dot):
    a = torch.randn(2, 3, dtype=torch.float64)
    b = torch.randn(2, 3, dtype=torch.float64)
    da, db = g_dot(a, b, 6)
    assert da.shape == a.shape and da.dtype == a.dtype
    torch.testing.assert_close(da, b, rtol=0, atol=1e-15)
    torch.testing.assert_close(db, a, rtol=0, atol=1e-15)


def test_numpy_and_noncontiguous_inputs_are_not_modified(g_dot):
    a = np.arange(6, dtype=np.float64)
    b_full = torch.randn(6, 2, dtype=torch.float64)
    b = b_full[:, 0]  # stride 2
    a_before, b_before = a.copy(), b.clone()
    da, db = g_dot(a, b, 6)
    assert isinstance(da, torch.Tensor)
    torch.testing.assert_close(da, b.contiguous(), rtol=0, atol=0)
    torch.testing.assert_close(db, torch.from_numpy(a_before), rtol=0, atol=0)
    np.testing.assert_array_equal(a, a_before)
    assert torch.equal(b, b_before)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(min_value=0, max_value=40), seed=st.integers(0, 2**16))
def test_dot_property_any_length_including_zero(g_dot, n, seed):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(n, dtype=torch.float64, generator=gen)
    b = torch.randn(n, dtype=torch.float64, generator=gen)
    da, db = g_dot(a, b, n)
    assert torch.equal(da, b) and torch.equal(db, a)


# ---- void function writing an output array


def test_void_output_seeded_by_grad_outputs(g_square_scale):
    x = torch.randn(5, dtype=torch.float64)
    out = torch.full((5,), 7.0, dtype=torch.float64)
    gy = torch.randn(5, dtype=torch.float64)
    gy_before = gy.clone()
    res = dict(zip(g_square_scale.wrt, g_square_scale(out, x, 1.5, 5, grad_outputs={"out": gy})))
    torch.testing.assert_close(res["x"], 2 * 1.5 * x * gy)
    assert res["a"] == pytest.approx(float((x * x * gy).sum()), rel=1e-12)
    assert torch.equal(out, torch.full((5,), 7.0, dtype=torch.float64))  # never modified
    assert torch.equal(gy, gy_before)


def test_void_without_seed_gives_zero(g_square_scale):
    x = torch.randn(4, dtype=torch.float64)
    res = dict(zip(g_square_scale.wrt, g_square_scale(torch.zeros(4, dtype=torch.float64), x, 2.0, 4)))
    assert torch.equal(res["x"], torch.zeros(4, dtype=torch.float64))
    assert res["a"] == 0.0


def test_void_wrt_input_only_still_accepts_output_seed():
    g = torchclad.gradient(SQUARE_SCALE, "square_scale", wrt="x")
    assert g.wrt == ("x",)
    x = torch.randn(3, dtype=torch.float64)
    gy = torch.ones(3, dtype=torch.float64)
    (dx,) = g(torch.zeros(3, dtype=torch.float64), x, 0.5, 3, grad_outputs={"out": gy})
    torch.testing.assert_close(dx, 2 * 0.5 * x)


def test_grad_outputs_errors(g_square_scale):
    x = torch.randn(3, dtype=torch.float64)
    out = torch.zeros(3, dtype=torch.float64)
    with pytest.raises(ValueError, match="grad_outputs\\['nope'\\]"):
        g_square_scale(out, x, 1.0, 3, grad_outputs={"nope": x})
    with pytest.raises(ValueError, match="2 element"):
        g_square_scale(out, x, 1.0, 3, grad_outputs={"out": torch.ones(2, dtype=torch.float64)})


# ---- templates and dtypes


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_template_dispatches_on_dtype(g_sumsq, dtype):
    x = torch.randn(8, dtype=dtype)
    (dx,) = g_sumsq(x, 8)
    assert dx.dtype == dtype
    torch.testing.assert_close(dx, 2 * x)


def test_dtype_mismatch_names_the_argument(g_dot):
    a = torch.randn(3, dtype=torch.float64)
    with pytest.raises(TypeError, match="argument 'b'.*float64.*float32"):
        g_dot(a, a.float(), 3)
    with pytest.raises(TypeError, match="'x'"):
        torchclad.gradient(SUMSQ, "sumsq")(torch.arange(3), 3)


def test_int_pointer_params_take_int_tensors():
    g = torchclad.gradient(GATHER, "gather")
    assert g.wrt == ("x",)
    x = torch.randn(4, dtype=torch.float64)
    idx = torch.tensor([0, 2, 2, 3], dtype=torch.int32)
    (dx,) = g(x, idx, 4)
    torch.testing.assert_close(dx, 2 * x * torch.tensor([1.0, 0.0, 2.0, 1.0], dtype=torch.float64))
    with pytest.raises(TypeError, match="argument 'idx'.*int32.*int64"):
        g(x, idx.long(), 4)


# ---- argument validation


def test_argument_count_and_kinds(g_dot):
    a = torch.randn(3, dtype=torch.float64)
    with pytest.raises(TypeError, match=r"dot\(a, b, n\) takes 3 argument\(s\), got 2"):
        g_dot(a, a)
    with pytest.raises(TypeError, match="argument 'a' is a pointer"):
        g_dot(1.0, a, 3)
    with pytest.raises(TypeError, match="argument 'n' is a scalar int"):
        g_dot(a, a, 3.5)
    with pytest.raises(TypeError, match="argument 'n' is a scalar int"):
        g_dot(a, a, a)
    with pytest.raises(ValueError, match="CPU only"):
        g_dot(a.to("meta"), a, 3)


def test_engine_errors_surface_with_location():
    with pytest.raises(ValueError, match=r"kernel\.cpp:\d+:\d+: "):
        torchclad.gradient("double f(double x) { goto end; end: return x; }\n", "f")
