"""torchclad.nn.MLP (nanoGPT: c_fc -> GELU tanh -> c_proj) and the residual op."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from nn_helpers import ATOL, LEADING, RTOL, gradcheck_module

import torchclad.nn as tnn
from torchclad.builtin import ops as builtin_ops
from torchclad.testing import assert_parity


class RefMLP(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = torch.nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = torch.nn.GELU(approximate="tanh")
        self.c_proj = torch.nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


def _cfg(n_embd=8, bias=True):
    return SimpleNamespace(n_embd=n_embd, n_head=2, block_size=8, bias=bias)


def test_state_dict_keys_like_nanogpt():
    ours, ref = tnn.MLP(_cfg()), RefMLP(_cfg())
    assert list(ours.state_dict()) == list(ref.state_dict()) == [
        "c_fc.weight", "c_fc.bias", "c_proj.weight", "c_proj.bias"]
    assert ours.gelu.approximate == "tanh"
    assert list(tnn.MLP(_cfg(bias=False)).state_dict()) == ["c_fc.weight", "c_proj.weight"]


def test_gradcheck_float64():
    assert gradcheck_module(tnn.MLP(_cfg(n_embd=3)), torch.randn(2, 3, 3))


@pytest.mark.parametrize("bias", [True, False])
def test_float32_parity(bias):
    errors = assert_parity(RefMLP(_cfg(32, bias)), tnn.MLP(_cfg(32, bias)),
                           torch.randn(4, 16, 32), rtol=RTOL, atol=ATOL)
    assert "grad of parameter 'c_fc.weight'" in errors


@pytest.mark.parametrize("lead", LEADING)
def test_leading_dims_and_zero_size(lead):
    assert_parity(RefMLP(_cfg()), tnn.MLP(_cfg()), torch.randn(*lead, 8), rtol=RTOL, atol=ATOL)


def test_bad_config_and_inputs():
    with pytest.raises(TypeError, match="config has no 'n_embd'"):
        tnn.MLP(SimpleNamespace(n_head=2))
    with pytest.raises(NotImplementedError, match="dropout"):
        tnn.MLP(SimpleNamespace(n_embd=4, dropout=0.2))
    with pytest.raises(ValueError, match="last dimension is 7, expected in_features = 8"):
        tnn.MLP(_cfg())(torch.randn(2, 7))


def test_residual_op():
    a = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(builtin_ops.residual(a, b), a + b)
    assert torch.autograd.gradcheck(builtin_ops.residual, (a, b))
    for dtype in (torch.float32, torch.float64):
        torch.library.opcheck(builtin_ops.residual, (a.detach().to(dtype).requires_grad_(),
                                                  b.detach().to(dtype).requires_grad_()))


def test_ops_refuse_inconsistent_arrays():
    """Called directly, the ops check shapes and indices before the kernel reads anything."""
    f = torch.randn
    cases = [
        (builtin_ops.residual, (f(3), f(4)), ValueError, "must match"),
        (builtin_ops.matmul, (f(2, 3), f(4, 5), f(4)), ValueError, "expected \\(OC, 3\\)"),
        (builtin_ops.matmul, (f(2, 3), f(4, 3), f(5)), ValueError, "'bias' must have shape \\(4,\\)"),
        (builtin_ops.matmul, (f(6), f(4, 3), f(4)), ValueError, "'inp' must have 2 dimensions"),
        (builtin_ops.softmax, (f(6),), ValueError, "2 dimensions"),
        (builtin_ops.layernorm, (f(2, 3), f(4), f(3)), ValueError, "'weight' must have shape"),
        (builtin_ops.attention, (f(2, 4, 6),), ValueError, "5 dimensions"),
        (builtin_ops.attention, (f(1, 4, 2, 2, 3),), ValueError, "\\(B, T, 3, NH, hs\\)"),
        (builtin_ops.crossentropy, (f(2, 3), torch.tensor([0, 3])), IndexError, "holds 3"),
        (builtin_ops.crossentropy, (f(2, 3), torch.tensor([0])), ValueError, "'targets' must"),
        (builtin_ops.embedding, (torch.tensor([0, -2]), f(3, 2)), IndexError, "holds -2"),
        (builtin_ops.encoder, (torch.tensor([[0, 9]]), f(3, 2), f(4, 2)), IndexError, "holds 9"),
        (builtin_ops.encoder, (torch.tensor([[0, 1]]), f(3, 2), f(1, 2)), ValueError, "maxT >= T"),
    ]
    for op, args, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            op(*args)
