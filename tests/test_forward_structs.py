"""Forward mode over structs (Clad's convention: the tangent of a struct is a struct of the
same type, `_d_p`), passed by value, by reference and by pointer, in arrays, with default
member initializers and member functions: torchclad.differentiate / hessian in float64
against torch's derivatives of the same function written with torch ops. (The corpus cases
struct_fields, nondiff_attr and new_delete run through the forward harness too.)"""
from __future__ import annotations

import math

import pytest
import torch

import torchclad

D = torch.float64

# a struct passed by value (its copy is the argument), a default member initializer, a
# const member function
BY_VALUE = r"""
struct P {
    double a, b = 2;
    double scaled(double t) const { return a * t + b; }
};
double g(P p, double t) { return p.a * t * t + p.b * p.a; }
double f(double x, double y) {
    P p{x, y};
    P q{y};
    return g(p, x * y) + q.scaled(x) * p.a;
}
"""


def f_torch(x, y):
    return x * (x * y) ** 2 + y * x + (y * x + 2) * x


# by reference, an array of structs whose default member initializer is not zero (the
# tangent array must start at zero all the same), a pointer to one element
BY_REFERENCE = r"""
struct Cell { double v = 1.5; double w; };
void relax(Cell& c, double k) { c.v = c.v * k + c.w; }
double h(double x, double y) {
    Cell cs[3];
    for (int i = 0; i < 3; ++i) {
        cs[i].w = x * (i + 1);
        relax(cs[i], y);
    }
    Cell* last = &cs[2];
    last->v *= x;
    return cs[0].v * cs[1].v + last->v;
}
"""


def h_torch(x, y):
    v = [1.5 * y + x * (i + 1) for i in range(3)]
    return v[0] * v[1] + v[2] * x


CASES = [pytest.param(BY_VALUE, "f", f_torch, id="by-value"),
         pytest.param(BY_REFERENCE, "h", h_torch, id="by-reference-array")]
POINT = (1.3, 0.7)


@pytest.mark.parametrize("src, name, ref", CASES)
def test_differentiate_matches_torch(src, name, ref):
    x, y = (torch.tensor(v, dtype=D) for v in POINT)
    gx, gy = torch.func.grad(ref, argnums=(0, 1))(x, y)
    assert math.isclose(torchclad.differentiate(src, name, "x")(*POINT), float(gx),
                        rel_tol=1e-12)
    assert math.isclose(torchclad.differentiate(src, name, "y")(*POINT), float(gy),
                        rel_tol=1e-12)


@pytest.mark.parametrize("src, name, ref", CASES)
def test_hessian_matches_torch(src, name, ref):
    x, y = (torch.tensor(v, dtype=D) for v in POINT)
    want = torch.autograd.functional.hessian(ref, (x, y))
    got = torchclad.hessian(src, name, "x, y")(*POINT)
    torch.testing.assert_close(got, torch.stack([torch.stack(r) for r in want]),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("src, name, ref", CASES)
def test_derivative_agrees_with_finite_differences(src, name, ref):
    """The first derivative against central differences of torch's function, and the
    Hessian's first row against central differences of the generated derivative."""
    d = torchclad.differentiate(src, name, "x")
    x, y = POINT
    h = 1e-6
    fd = (float(ref(torch.tensor(x + h, dtype=D), torch.tensor(y, dtype=D))) -
          float(ref(torch.tensor(x - h, dtype=D), torch.tensor(y, dtype=D)))) / (2 * h)
    assert math.isclose(d(x, y), fd, rel_tol=1e-7)
    row = torchclad.hessian(src, name, "x, y")(x, y)[0]
    fd2 = [(d(x + h, y) - d(x - h, y)) / (2 * h), (d(x, y + h) - d(x, y - h)) / (2 * h)]
    assert torch.allclose(row, torch.tensor(fd2, dtype=D), rtol=1e-6, atol=1e-6)


def test_struct_passed_by_value_reverse_mode():
    """The gradient (reverse mode) of a function passing a struct by value: the copy was
    lowered as a call of a function named after the variable before (`g(p(), ...)`)."""
    x, y = (torch.tensor(v, dtype=D) for v in POINT)
    want = torch.func.grad(f_torch, argnums=(0, 1))(x, y)
    got = torchclad.gradient(BY_VALUE, "f")(*POINT)
    assert all(math.isclose(float(a), float(b), rel_tol=1e-12) for a, b in zip(got, want))
