"""torchclad.nn.GELU (built-in kernels gelu_forward / gelu_erf_forward, csrc/kernels/gelu.cpp)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import torchclad.nn as tnn
from torchclad.builtin import ops as builtin_ops
from torchclad.testing import assert_parity

RTOL, ATOL = 1e-4, 1e-5
MODES = ["tanh", "none"]


def _ref(approximate="tanh"):
    return torch.nn.GELU(approximate=approximate)


def test_constructor_and_repr():
    m = tnn.GELU()
    assert m.approximate == torch.nn.GELU().approximate == "none"  # torch's default
    assert "approximate='none'" in repr(m)
    assert "approximate='tanh'" in repr(tnn.GELU(approximate="tanh"))
    assert tnn.GELU(approximate="tanh").state_dict() == {}
    with pytest.raises(ValueError, match="'tanh' or 'none'"):
        tnn.GELU(approximate="sigmoid")


@pytest.mark.parametrize("approximate", MODES)
def test_gradcheck_float64(approximate):
    x = torch.randn(4, 7, dtype=torch.float64, requires_grad=True) * 2
    assert torch.autograd.gradcheck(tnn.GELU(approximate), (x,))


@pytest.mark.parametrize("approximate", MODES)
def test_float32_parity(approximate):
    x = torch.randn(4, 16, 32) * 3
    errors = assert_parity(_ref(approximate), tnn.GELU(approximate), x, rtol=RTOL, atol=ATOL)
    assert set(errors) == {"output[0]", "grad of input 0"}


@settings(max_examples=20, deadline=None)
@given(
    shape=st.lists(st.integers(min_value=0, max_value=5), min_size=0, max_size=3).map(
        lambda dims: (*dims, 3)),
    dtype=st.sampled_from([torch.float32, torch.float64]),
    approximate=st.sampled_from(MODES),
)
def test_parity_over_shapes(shape, dtype, approximate):
    """Leading dims 0-3, zero-size included; both dtypes, both forms."""
    x = torch.randn(shape, dtype=dtype)
    assert_parity(_ref(approximate), tnn.GELU(approximate), x, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("approximate", MODES)
def test_zero_dim_and_empty(approximate):
    for x in (torch.tensor(0.3, requires_grad=True), torch.empty(0, requires_grad=True)):
        y = tnn.GELU(approximate)(x)
        assert y.shape == x.shape
        y.sum().backward()
        assert x.grad.shape == x.shape


def test_noncontiguous_input():
    base = torch.randn(8, 6, dtype=torch.float64)
    x = base.t()[:, ::2]
    assert not x.is_contiguous()
    for mode in MODES:
        assert_parity(_ref(mode), tnn.GELU(mode), x, rtol=1e-10, atol=1e-12)


def test_opcheck():
    for op in (torch.ops.torchclad.gelu_forward, torch.ops.torchclad.gelu_erf_forward):
        for dtype in (torch.float32, torch.float64):
            x = torch.randn(3, 5, dtype=dtype, requires_grad=True)
            torch.library.opcheck(op, (x,))
    assert builtin_ops.gelu_erf._name == "gelu_erf_forward"


def test_torch_compile_fullgraph():
    class Net(torch.nn.Module):
        def __init__(self, act):
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)
            self.act = act

        def forward(self, x):
            return self.act(self.fc(x)).sum(-1)

    torch.manual_seed(0)
    ref = Net(_ref())
    ours = Net(tnn.GELU(approximate="tanh"))
    compiled = torch.compile(ours, fullgraph=True)
    for batch in (4, 6):
        x = torch.randn(batch, 8)
        assert_parity(ref, compiled, x, rtol=RTOL, atol=ATOL)


def test_errors_name_the_input():
    m = tnn.GELU()
    with pytest.raises(TypeError, match="float32 or float64 tensor, got int64"):
        m(torch.arange(4))
    with pytest.raises(ValueError, match="CPU only"):
        m(torch.randn(3, device="meta"))
    with pytest.raises(TypeError, match="input 'inp' is a int64 tensor"):  # the op's own check
        builtin_ops.gelu(torch.arange(4))


def test_assert_parity_reports_mismatch():
    with pytest.raises(AssertionError, match="output\\[0\\] differs"):
        assert_parity(torch.nn.Tanh(), tnn.GELU(), torch.randn(5))
    lin_a, lin_b = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    errors = assert_parity(lin_a, lin_b, torch.randn(4, 3))  # state_dict copied a -> b
    assert {"grad of parameter 'weight'", "grad of parameter 'bias'",
            "grad of input 0"} <= set(errors)
