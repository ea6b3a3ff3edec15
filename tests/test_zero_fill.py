"""torchclad._C_dispatch.zero_fill (csrc/dispatch/zero_fill.h): streaming stores zero exactly the
tensor's bytes -- every alignment of its start, every length of its tail, across several parallel
tasks and thread counts -- and nothing beside it; it counts as an in-place write; anything it
cannot stream (a non-contiguous tensor, a small one by default) is zeroed by Tensor::zero_."""

from __future__ import annotations

import pytest
import torch

from torchclad.bridge import fastpath
from torchclad.bridge.memory import zero_fill

ext = fastpath.extension()
pytestmark = pytest.mark.skipif(ext is None, reason="torchclad._C_dispatch is not built here")

SENTINEL = 7.0


def _view(dtype, offset, n, pad=40):
    """A view of n elements at `offset` into a buffer of SENTINEL values (pad beyond it)."""
    base = torch.full((offset + n + pad,), SENTINEL, dtype=dtype)
    return base, base[offset:offset + n]


def _check(base, offset, n):
    assert not base[offset:offset + n].any()
    outside = torch.cat([base[:offset], base[offset + n:]])
    assert torch.all(outside == SENTINEL), "zero_fill wrote outside the tensor"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int8])
@pytest.mark.parametrize("offset", [0, 1, 3, 7, 8, 15, 16, 17, 63, 64])
@pytest.mark.parametrize("n", [1, 15, 16, 17, 63, 64, 65, 127, 1000, 4099])
def test_streaming_zeroes_exactly_the_tensor(dtype, offset, n):
    base, t = _view(dtype, offset, n)
    assert ext.zero_fill(t, 1) is True
    _check(base, offset, n)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_streaming_over_many_tasks_at_any_thread_count(threads):
    """5 MB and a few bytes: several 1 MiB tasks of torch's pool, an unaligned start and tail."""
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        n, offset = (5 << 20) // 4 + 3, 5
        base, t = _view(torch.float32, offset, n)
        assert ext.zero_fill(t, 1) is True
        _check(base, offset, n)
    finally:
        torch.set_num_threads(old)


def test_empty_tensor_and_version_counter():
    empty = torch.empty(0)
    assert ext.zero_fill(empty, 1) is False  # nothing to stream
    t = torch.ones(100)
    v = t._version
    ext.zero_fill(t, 1)
    assert t._version > v  # an in-place write, seen by autograd's saved-tensor checks
    ext.zero_fill(t, 0)
    assert t._version > v + 1


def test_non_contiguous_and_small_tensors_take_zero_():
    m = torch.full((8, 6), SENTINEL)
    col = m[:, 2]
    assert ext.zero_fill(col, 1) is False  # not contiguous: Tensor::zero_
    assert not col.any() and torch.all(m[:, [0, 1, 3, 4, 5]] == SENTINEL)
    small = torch.ones(1000)
    assert ext.streaming_threshold() > small.numel() * 4
    assert ext.zero_fill(small, -1) is False and not small.any()  # below the threshold


def test_python_helper_returns_the_zeroed_tensor():
    t = torch.ones(33, dtype=torch.float64)
    assert zero_fill(t) is t and not t.any()
