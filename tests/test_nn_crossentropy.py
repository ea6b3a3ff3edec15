"""torchclad.nn.CrossEntropyLoss: fused softmax + cross-entropy (csrc/kernels/crossentropy.cpp)."""

from __future__ import annotations

import math

import pytest
import torch
from nn_helpers import ATOL, RTOL

import torchclad.nn as tnn
from torchclad.builtin import ops as builtin_ops
from torchclad.testing import assert_parity

REDUCTIONS = ["mean", "sum", "none"]


def _pair(**kw):
    return torch.nn.CrossEntropyLoss(**kw), tnn.CrossEntropyLoss(**kw)


def test_constructor_like_torch():
    ref, ours = _pair()
    assert ours.ignore_index == -100 and ours.reduction == "mean"
    assert ours.state_dict() == ref.state_dict() == {}
    with pytest.raises(NotImplementedError, match="class weights"):
        tnn.CrossEntropyLoss(weight=torch.ones(3))
    with pytest.raises(NotImplementedError, match="label_smoothing"):
        tnn.CrossEntropyLoss(label_smoothing=0.1)
    with pytest.raises(ValueError, match="reduction must be one of"):
        tnn.CrossEntropyLoss(reduction="avg")


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_gradcheck_float64(reduction):
    x = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    t = torch.tensor([0, 3, -100, 1, 3])
    assert torch.autograd.gradcheck(tnn.CrossEntropyLoss(reduction=reduction), (x, t))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_float32_parity(reduction):
    x = torch.randn(64, 50) * 3
    t = torch.randint(0, 50, (64,))
    t[::7] = -100
    errors = assert_parity(*_pair(reduction=reduction), x, t, rtol=RTOL, atol=ATOL)
    assert set(errors) == {"output[0]", "grad of input 0"}


# a row runs in full blocks of 64, then full blocks of 16, then one by one
# (csrc/kernels/crossentropy.cpp): lengths on both sides of each boundary
@pytest.mark.parametrize("C", [1, 15, 16, 17, 56, 63, 64, 65, 80, 83, 127, 143, 150])
def test_row_lengths_around_the_lane_blocks(C):
    g = torch.Generator().manual_seed(C)
    x = torch.randn(9, C, dtype=torch.float64, generator=g) * 4
    t = torch.randint(0, C, (9,), generator=g)
    t[3] = -100
    assert_parity(*_pair(reduction="sum"), x, t, rtol=1e-12, atol=1e-12)
    assert_parity(*_pair(reduction="mean"), x.float(), t, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("shapes", [((7,), ()), ((4, 7), (4,)), ((2, 7, 3), (2, 3)),
                                    ((2, 7, 3, 2), (2, 3, 2)), ((0, 7), (0,)),
                                    ((0, 7, 3), (0, 3))], ids=str)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_input_shapes_and_zero_size(shapes, reduction):
    xs, ts = shapes
    C = xs[0] if len(xs) == 1 else xs[1]
    x, t = torch.randn(xs), torch.randint(0, C, ts)
    assert_parity(*_pair(reduction=reduction), x, t, rtol=RTOL, atol=ATOL)


def test_large_logits_are_stable():
    x = torch.tensor([[1e4, -1e4, 0.0], [-1e4, 1e4, 1e4], [-1e4, -1e4, -1e4]])
    t = torch.tensor([1, 2, 0])
    for r in REDUCTIONS:
        errors = assert_parity(*_pair(reduction=r), x, t, rtol=RTOL, atol=ATOL)
        assert all(math.isfinite(e) for e in errors.values())


def test_ignore_index():
    x, t = torch.randn(6, 5), torch.tensor([0, 2, 2, 4, 1, 2])
    for ii in (2, 0):  # a class index as ignore_index, like torch
        assert_parity(*_pair(ignore_index=ii), x, t, rtol=RTOL, atol=ATOL)
    # all ignored: mean is nan (0 / 0), like torch; sum is 0
    t_all = torch.full((6,), -100)
    x_req = x.clone().requires_grad_(True)
    loss = tnn.CrossEntropyLoss()(x_req, t_all)
    assert torch.isnan(loss) and torch.isnan(torch.nn.CrossEntropyLoss()(x, t_all))
    assert tnn.CrossEntropyLoss(reduction="sum")(x, t_all).item() == 0.0


def test_int32_targets_and_float64():
    x = torch.randn(5, 4, dtype=torch.float64)
    t = torch.tensor([0, 1, 2, 3, 0], dtype=torch.int32)
    want = torch.nn.CrossEntropyLoss()(x, t.long())
    torch.testing.assert_close(tnn.CrossEntropyLoss()(x, t), want, rtol=1e-12, atol=1e-12)


def test_bad_targets():
    loss = tnn.CrossEntropyLoss()
    x = torch.randn(3, 5)
    with pytest.raises(IndexError, match="target 5 is out of range for 5 classes"):
        loss(x, torch.tensor([0, 5, 1]))
    with pytest.raises(IndexError, match="target -1 is out of range.*ignore_index=-100"):
        loss(x, torch.tensor([0, -1, 1]))
    with pytest.raises(ValueError, match="target has shape \\(2,\\), expected \\(3,\\)"):
        loss(x, torch.tensor([0, 1]))
    with pytest.raises(NotImplementedError, match="class-probability"):
        loss(x, torch.softmax(x, -1))
    with pytest.raises(TypeError, match="int64 class indices, got int16"):
        loss(x, torch.tensor([0, 1, 2], dtype=torch.int16))
    with pytest.raises(TypeError, match="float32 or float64 tensor, got int64"):
        loss(torch.ones(3, 5, dtype=torch.int64), torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="at least 1 dimension[ ,]"):
        loss(torch.tensor(1.0), torch.tensor(0))
    with pytest.raises(ValueError, match="0 classes"):
        loss(torch.randn(3, 0), torch.tensor([0, 0, 0]))
    with pytest.raises(ValueError, match="CPU only"):
        loss(torch.randn(3, 5, device="meta"), torch.tensor([0, 1, 2]))


def test_opcheck():
    for dtype in (torch.float32, torch.float64):
        x = torch.randn(4, 6, dtype=dtype, requires_grad=True)
        torch.library.opcheck(builtin_ops.crossentropy, (x, torch.tensor([5, -1, 0, 2])))


def test_targets_batched_by_vmap_and_traced():
    """The module's fast lane checks the targets by reading their values; under vmap (targets
    batched too) and make_fx that read is the checked_indices op instead, as on the full path."""
    from torch.fx.experimental.proxy_tensor import make_fx

    x = torch.randn(3, 4, 6, dtype=torch.float64)
    t = torch.tensor([[0, 1, 5, 2], [3, 3, 0, 1], [5, 4, 2, 0]])
    for reduction in ("mean", "sum", "none"):
        got = torch.func.vmap(tnn.CrossEntropyLoss(reduction=reduction))(x, t)
        want = torch.func.vmap(torch.nn.CrossEntropyLoss(reduction=reduction))(x, t)
        torch.testing.assert_close(got, want)
    graph = make_fx(tnn.CrossEntropyLoss(), tracing_mode="fake")(x[0], t[0])
    torch.testing.assert_close(graph(x[1], t[1]), torch.nn.functional.cross_entropy(x[1], t[1]))
