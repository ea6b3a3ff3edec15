"""The reverse rule of a product with a repeated factor (engine/reverse/adjoint.py,
``repeated_factors``): ``c * x * x * x`` gives one term ``d x += 3 * (d y * (c * x * x))``
instead of three differently associated ones. Each case: the generated code's shape, and the
gradient against gradcheck in float64 (the kernel compiled by torchclad.function)."""

from __future__ import annotations

import pytest
import torch

import torchclad
from torchclad import engine as ad

CASES = {
    # name: (loop body, inputs, additions into d x per iteration, a factor the code shows)
    "cube": ("out[i] = 0.5 * x[i] * x[i] * x[i];", ["x"], 1, "double(3)"),
    "square": ("out[i] = x[i] * x[i];", ["x"], 1, "double(2)"),
    # x twice around another active factor; y once
    "around": ("out[i] = x[i] * y[i] * x[i];", ["x", "y"], 1, "double(2)"),
    # nested products are one product: x three times
    "nested": ("out[i] = (x[i] * x[i]) * (y[i] * x[i]);", ["x", "y"], 1, "double(3)"),
    # repeated library calls are reads too
    "calls": ("out[i] = std::sin(x[i]) * std::sin(x[i]) * y[i];", ["x", "y"], 1, "double(2)"),
    # the repeated factor is not active (y is not differentiated): the binary rule
    "inactive_repeat": ("out[i] = y[i] * y[i] * x[i];", ["x"], 1, None),
    # two different elements of x: no repeat, the binary rule (two additions into d x)
    "neighbour": ("out[i] = x[i] * x[(i + 1) % n];", ["x"], 2, None),
    # a user function's result is taken into a local before the product: merged
    "user_call": ("out[i] = x[i] * x[i] * twice(y[i]);", ["x", "y"], 1, "double(2)"),
    # a conditional among the factors is not a plain read: the binary rule, so x's two
    # occurrences (either side of it) give two additions
    "conditional": ("out[i] = x[i] * (y[i] > 0 ? y[i] : 1.0) * x[i];", ["x", "y"], 2, None),
}

HEADER = "#include <cmath>\nstatic double twice(double v) { return 2.0 * v; }\n"


def _source(body):
    return (HEADER + "void f(double* out, const double* x, const double* y, int n) {\n"
            f"    for (int i = 0; i < n; i++) {body}\n}}\n")


@pytest.mark.parametrize("case", sorted(CASES))
def test_generated_terms(case):
    body, wrt, adds, factor = CASES[case]
    d = ad.differentiate(_source(body), "f", wrt)
    sweep = dict(d.functions)["f_pullback"]
    assert sweep.count("_d_x[i] +=") + sweep.count("_d_x[(i + 1) % n] +=") == adds, sweep
    if factor is None:
        assert "double(2)" not in sweep and "double(3)" not in sweep, sweep
    else:
        assert factor in sweep, sweep


@pytest.mark.parametrize("case", sorted(CASES))
def test_gradient(case):
    """Both x and y differentiated (so in "inactive_repeat" y's square is merged too)."""
    f = _op(CASES[case][0])
    torch.manual_seed(0)
    args = tuple(torch.randn(9, dtype=torch.float64, requires_grad=True) for _ in range(2))
    assert torch.autograd.gradcheck(f, args)


def test_cube_equals_the_closed_form():
    f = _op(CASES["cube"][0])
    x = torch.linspace(-3, 3, 13, dtype=torch.float64, requires_grad=True)
    f(x, torch.zeros(13, dtype=torch.float64)).backward(torch.ones(13, dtype=torch.float64))
    torch.testing.assert_close(x.grad, 1.5 * x.detach() ** 2, rtol=1e-15, atol=1e-15)


def _op(body):
    return torchclad.function(_source(body), "f", inputs=["x", "y"], outputs={"out": ("n",)},
                              input_shapes={"x": ("n",), "y": ("n",)})
