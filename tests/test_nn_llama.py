"""torchclad.nn.RMSNorm, SiLU, SwiGLU, RotaryEmbedding (built-in kernels rmsnorm.cpp, silu.cpp,
rope.cpp): float64 gradcheck, float32 parity with the torch equivalent (torch.nn.RMSNorm,
torch.nn.SiLU, silu(a) * b, the interleaved rotation written in torch), shapes and errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import torchclad.nn as tnn
from torchclad.builtin import llama_ops
from torchclad.testing import assert_parity

from nn_helpers import ATOL, LEADING, RTOL, gradcheck_module


class TorchSwiGLU(torch.nn.Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        a, b = x.chunk(2, self.dim)
        return F.silu(a) * b


class TorchRotary(torch.nn.Module):
    """The interleaved rotation in plain torch (as Meta's LLaMA and torchtune write it)."""

    def __init__(self, head_dim, max_seq_len=64, base=10000.0):
        super().__init__()
        theta = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        self.angles = torch.arange(max_seq_len, dtype=torch.float64)[:, None] * theta[None, :]

    def forward(self, x):
        T = x.shape[1]
        c = self.angles[:T].cos().to(x.dtype)[None, :, None, :]
        s = self.angles[:T].sin().to(x.dtype)[None, :, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)


# ---- RMSNorm


def test_rmsnorm_constructor_matches_torch():
    m, ref = tnn.RMSNorm(8), torch.nn.RMSNorm(8)
    assert m.eps is None and ref.eps is None
    assert m.state_dict().keys() == ref.state_dict().keys()
    m.load_state_dict(ref.state_dict())
    assert tnn.RMSNorm((2, 4), elementwise_affine=False).weight is None
    with pytest.raises(ValueError, match="eps must be >= 0"):
        tnn.RMSNorm(4, eps=-1.0)


@pytest.mark.parametrize("eps", [None, 1e-6])
@pytest.mark.parametrize("affine", [True, False])
def test_rmsnorm_gradcheck_float64(eps, affine):
    m = tnn.RMSNorm(70, eps=eps, elementwise_affine=affine)  # 64 lanes + a tail of 6
    if affine:
        with torch.no_grad():
            m.weight.normal_()
    assert gradcheck_module(m, torch.randn(3, 70, dtype=torch.float64))


@pytest.mark.parametrize("shape", [(4, 16, 96), (5, 7)])
@pytest.mark.parametrize("eps", [None, 1e-5])
def test_rmsnorm_float32_parity(shape, eps):
    ref = torch.nn.RMSNorm(shape[-1], eps=eps)
    with torch.no_grad():
        ref.weight.normal_()
    m = tnn.RMSNorm(shape[-1], eps=eps)
    m.load_state_dict(ref.state_dict())
    assert_parity(ref, m, torch.randn(shape), rtol=RTOL, atol=ATOL)


def test_rmsnorm_multi_dim_shape_and_leading_dims():
    for lead in LEADING:
        ref = torch.nn.RMSNorm((2, 5))
        m = tnn.RMSNorm((2, 5))
        assert_parity(ref, m, torch.randn(*lead, 2, 5), rtol=RTOL, atol=ATOL)


def test_rmsnorm_errors():
    m = tnn.RMSNorm(8)
    with pytest.raises(ValueError, match=r"trailing dimensions are \(7,\), expected "
                                         r"normalized_shape = \(8,\)"):
        m(torch.randn(3, 7))
    with pytest.raises(TypeError, match="must be a float32 tensor"):
        m(torch.randn(3, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match="'weight' must have shape"):
        llama_ops.rmsnorm_op(1e-5)(torch.randn(3, 8), torch.randn(5))


# ---- SiLU, SwiGLU


def test_silu_gradcheck_and_parity():
    x = (torch.randn(5, 9, dtype=torch.float64) * 3).requires_grad_()
    assert torch.autograd.gradcheck(tnn.SiLU(), (x,))
    for lead in LEADING:
        assert_parity(torch.nn.SiLU(), tnn.SiLU(), torch.randn(*lead, 4) * 4, rtol=RTOL,
                      atol=ATOL)
    with pytest.raises(ValueError, match="inplace=True is not supported"):
        tnn.SiLU(inplace=True)


def test_silu_saturates_without_nan():
    x = torch.tensor([-1000.0, -90.0, 0.0, 90.0, 1000.0], dtype=torch.float64,
                     requires_grad=True)
    y = tnn.SiLU()(x)
    (g,) = torch.autograd.grad(y.sum(), (x,))
    ref = x.detach().clone().requires_grad_()
    (rg,) = torch.autograd.grad(F.silu(ref).sum(), (ref,))
    torch.testing.assert_close(y, F.silu(x.detach()))
    torch.testing.assert_close(g, rg)
    assert torch.isfinite(g).all()


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_swiglu_gradcheck_and_parity(dim):
    x = torch.randn(4, 6, 8, dtype=torch.float64)
    assert gradcheck_module(tnn.SwiGLU(dim), x)
    assert_parity(TorchSwiGLU(dim), tnn.SwiGLU(dim), torch.randn(4, 6, 8) * 3, rtol=RTOL,
                  atol=ATOL)


@settings(max_examples=15, deadline=None)
@given(lead=st.sampled_from(LEADING), h=st.integers(min_value=0, max_value=9),
       dtype=st.sampled_from([torch.float32, torch.float64]))
def test_swiglu_parity_over_shapes(lead, h, dtype):
    assert_parity(TorchSwiGLU(), tnn.SwiGLU(), torch.randn(*lead, 2 * h, dtype=dtype),
                  rtol=RTOL, atol=ATOL)


def test_swiglu_errors():
    with pytest.raises(ValueError, match="must be even"):
        tnn.SwiGLU()(torch.randn(3, 5))
    with pytest.raises(IndexError, match="out of range"):
        tnn.SwiGLU(dim=2)(torch.randn(3, 4))


# ---- rotary embedding


def test_rotary_gradcheck_float64():
    m = tnn.RotaryEmbedding(8, max_seq_len=16, dtype=torch.float64)
    x = torch.randn(2, 5, 3, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(m, (x,))


@pytest.mark.parametrize("shape", [(2, 16, 4, 32), (1, 1, 1, 2), (0, 3, 2, 4), (3, 7, 2, 6)])
def test_rotary_float32_parity(shape):
    m = tnn.RotaryEmbedding(shape[-1], max_seq_len=32)
    assert m.state_dict() == {}
    assert_parity(TorchRotary(shape[-1], 32), m, torch.randn(shape), rtol=RTOL, atol=ATOL)


def test_rotary_tables_follow_the_input_dtype_and_errors():
    m = tnn.RotaryEmbedding(4, max_seq_len=8)
    x = torch.randn(1, 3, 2, 4, dtype=torch.float64)
    torch.testing.assert_close(m(x), TorchRotary(4, 8)(x))
    with pytest.raises(ValueError, match="exceeds max_seq_len = 8"):
        m(torch.randn(1, 9, 2, 4))
    with pytest.raises(ValueError, match="last dimension is 6, expected head_dim = 4"):
        m(torch.randn(1, 3, 2, 6))
    with pytest.raises(ValueError, match="head_dim must be even"):
        tnn.RotaryEmbedding(5)


def test_ops_pass_opcheck():
    x = torch.randn(3, 8, dtype=torch.float64, requires_grad=True)
    torch.library.opcheck(llama_ops.silu_op.op, (x,))
    torch.library.opcheck(llama_ops.swiglu_op.op, (x,))
    torch.library.opcheck(llama_ops.rmsnorm_op(1e-5), (x, torch.randn(8, dtype=torch.float64)))
    m = tnn.RotaryEmbedding(4, max_seq_len=8, dtype=torch.float64)
    torch.library.opcheck(llama_ops.rope_op.op,
                          (torch.randn(2, 3, 2, 4, dtype=torch.float64, requires_grad=True),
                           m.freqs_cos, m.freqs_sin))


def test_llama_block_compiles_fullgraph():
    torch.manual_seed(0)
    norm, rope, act = tnn.RMSNorm(16), tnn.RotaryEmbedding(4, 8), tnn.SwiGLU()

    def block(x):
        h = norm(x)
        q = rope(h.reshape(2, 5, 4, 4)).reshape(2, 5, 16)
        return act(torch.cat((q, h), -1))

    x = torch.randn(2, 5, 16, requires_grad=True)
    eager = block(x)
    compiled = torch.compile(block, fullgraph=True)(x)
    torch.testing.assert_close(compiled, eager)
    (g1,) = torch.autograd.grad(eager.sum(), (x,))
    (g2,) = torch.autograd.grad(torch.compile(block, fullgraph=True)(x).sum(), (x,))
    torch.testing.assert_close(g1, g2)
