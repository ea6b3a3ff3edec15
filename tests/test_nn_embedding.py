"""torchclad.nn.Embedding and the GPT-2 encoder op (csrc/kernels/encoder.cpp)."""

from __future__ import annotations

import pytest
import torch
from nn_helpers import ATOL, LEADING, RTOL, gradcheck_module

import torchclad.nn as tnn
from torchclad.builtin import ops as builtin_ops
from torchclad.testing import assert_parity


def test_constructor_state_dict_and_init_like_torch():
    torch.manual_seed(0)
    ref = torch.nn.Embedding(10, 4)
    torch.manual_seed(0)
    ours = tnn.Embedding(10, 4)
    assert list(ours.state_dict()) == ["weight"]
    assert torch.equal(ours.weight, ref.weight)
    assert repr(ours) == repr(ref) == "Embedding(10, 4)"
    w = torch.randn(10, 4)
    assert torch.equal(tnn.Embedding(10, 4, _weight=w).weight, w)
    assert not tnn.Embedding(10, 4, _freeze=True).weight.requires_grad
    for kw in (dict(padding_idx=0), dict(max_norm=1.0), dict(scale_grad_by_freq=True),
               dict(sparse=True)):
        with pytest.raises(NotImplementedError, match=next(iter(kw))):
            tnn.Embedding(10, 4, **kw)


def test_gradcheck_float64():
    idx = torch.tensor([[0, 3, 3], [9, 1, 0]])  # repeated indices accumulate
    assert gradcheck_module(tnn.Embedding(10, 3), idx)


def test_float32_parity_repeated_indices():
    idx = torch.randint(0, 50, (4, 64))
    errors = assert_parity(torch.nn.Embedding(50, 32), tnn.Embedding(50, 32), idx,
                           rtol=RTOL, atol=ATOL)
    assert set(errors) == {"output[0]", "grad of parameter 'weight'"}


@pytest.mark.parametrize("lead", LEADING)
def test_index_shapes_and_zero_size(lead):
    idx = torch.randint(0, 7, lead)
    assert_parity(torch.nn.Embedding(7, 5), tnn.Embedding(7, 5), idx, rtol=RTOL, atol=ATOL)


def test_int32_indices_and_float64_weights():
    idx = torch.randint(0, 7, (3, 4), dtype=torch.int32)
    ref = torch.nn.Embedding(7, 5, dtype=torch.float64)
    assert_parity(ref, tnn.Embedding(7, 5, dtype=torch.float64), idx, rtol=1e-12, atol=1e-12)


def test_out_of_range_indices_raise_index_error_naming_the_value():
    emb = tnn.Embedding(10, 4)
    with pytest.raises(IndexError, match="index 10 is out of range for num_embeddings=10"):
        emb(torch.tensor([1, 10, 2]))
    with pytest.raises(IndexError, match="index -1 is out of range"):
        emb(torch.tensor([[0, -1]]))
    with pytest.raises(IndexError, match="index 3 is out of range for num_embeddings=0"):
        tnn.Embedding(0, 4)(torch.tensor([3]))


def test_bad_inputs():
    emb = tnn.Embedding(10, 4)
    with pytest.raises(TypeError, match="int64 \\(or int32\\) indices, got float32"):
        emb(torch.tensor([1.0, 2.0]))
    with pytest.raises(TypeError, match="tensor of int64 indices, got list"):
        emb([1, 2])
    with pytest.raises(ValueError, match="CPU only"):
        emb(torch.tensor([1], device="meta"))
    with pytest.raises(ValueError, match="_weight has shape \\(3, 4\\), expected \\(10, 4\\)"):
        tnn.Embedding(10, 4, _weight=torch.randn(3, 4))


def test_encoder_op_gpt2_input_layer():
    """encoder_forward: wte[idx] + wpe[t], both gradients (for the GPT-2 owner)."""
    idx = torch.tensor([[1, 4, 4], [0, 2, 1]])
    wte = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    wpe = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    out = builtin_ops.encoder(idx, wte, wpe)
    torch.testing.assert_close(out, wte[idx] + wpe[:3])
    assert torch.autograd.gradcheck(lambda a, b: builtin_ops.encoder(idx, a, b), (wte, wpe))


def test_opcheck():
    for dtype in (torch.float32, torch.float64):
        w = torch.randn(6, 3, dtype=dtype, requires_grad=True)
        torch.library.opcheck(builtin_ops.embedding, (torch.tensor([5, 0, 5]), w))
        wpe = torch.randn(3, 3, dtype=dtype, requires_grad=True)
        torch.library.opcheck(builtin_ops.encoder, (torch.tensor([[5, 0], [1, 1]]), w, wpe))
    torch.library.opcheck(builtin_ops.checked_indices, (torch.tensor([1, 2, 0]), 3, None, "Embedding"))
    torch.library.opcheck(builtin_ops.checked_indices,
                          (torch.tensor([1, -100, 0]), 3, -100, "CrossEntropyLoss"))


def test_eager_index_check_is_the_op_without_its_dispatch():
    """`builtin_ops.checked` runs the op's body directly for a plain eager call (the custom op's
    dispatch cost more than the check): the same result and the same errors; under a dispatch
    mode it calls the op, which the mode then sees."""
    from torch.utils._python_dispatch import TorchDispatchMode

    for args in ((torch.tensor([1, 2, 0]), 3, None, "Embedding"),
                 (torch.tensor([1, -100, 0], dtype=torch.int32), 3, -100, "CrossEntropyLoss")):
        got, want = builtin_ops.checked(*args), builtin_ops.checked_indices(*args)
        assert got.dtype == torch.int64 and torch.equal(got, want)
    for bad in ((torch.tensor([1, 3]), 3, None, "Embedding"),
                (torch.tensor([-1, 0]), 3, -100, "CrossEntropyLoss")):
        with pytest.raises(IndexError) as direct:
            builtin_ops.checked(*bad)
        with pytest.raises(IndexError) as op:
            builtin_ops.checked_indices(*bad)
        assert str(direct.value) == str(op.value)

    class Seen(TorchDispatchMode):
        ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Seen.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    with Seen():
        builtin_ops.checked(torch.tensor([1, 2]), 3, None, "Embedding")
    assert any("checked_indices" in o for o in Seen.ops), Seen.ops
