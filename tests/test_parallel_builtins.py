"""Every built-in kernel runs in parallel in its forward and in its generated reverse sweep
(csrc/kernels/*.cpp, issue #15), and its results and gradients are the same bits at 1, 2 and 3
threads: the engine gives shared adjoints (layernorm's d weight summed over rows, the
encoder's scatter into wte) partial sums per fixed chunk of rows, never a reduction whose
order depends on the thread count. (Matmul is BLAS: its GEMMs keep BLAS's own threads and
bits; its bias sum and seed reset run by fixed blocks of rows, the same bits too.)
"""
from __future__ import annotations

import warnings

import pytest
import torch

import torchclad.nn as tnn
from torchclad.builtin import ops as builtin_ops
from torchclad.builtin import registry

THREADS = (1, 2, 3)


@pytest.mark.parametrize("spec", [s for s in registry.KERNELS if s.name != "matmul_forward"],
                         ids=lambda s: s.name)
def test_generated_sweeps_keep_every_pragma(spec):
    """Both sweeps of every built-in kernel keep its OpenMP loops, and the engine has nothing
    to warn about (no pragma dropped, no reverse loop left serial)."""
    from torchclad import engine
    from torchclad.engine import ParallelWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error", ParallelWarning)
        d = engine.differentiate(registry.unit_source(spec), spec.name,
                                 None if spec.wrt is None else list(spec.wrt), filename=spec.file)
    assert d.notes == ()
    code = dict(d.functions)
    for kind in ("reverse_forw", "reverse_sweep"):
        names = [n for n in code if n.endswith("_" + kind)]
        assert names
        for n in names:
            if "gpt2" in n:
                continue    # the model itself: layer after layer (its callees are parallel)
            assert "#pragma omp parallel for" in code[n], f"{n} has no parallel loop"


def _bits(fn, *tensors):
    """fn's outputs and the gradients of `tensors` (leaves requiring grad), at each thread count."""
    before = torch.get_num_threads()
    out = []
    try:
        for k in THREADS:
            torch.set_num_threads(k)
            for t in tensors:
                t.grad = None
            res = fn()
            res = res if isinstance(res, tuple) else (res,)
            seed = [torch.linspace(-1, 1, r.numel(), dtype=r.dtype).reshape(r.shape) for r in res]
            torch.autograd.backward(res, seed)
            out.append([r.detach().clone() for r in res] + [t.grad.clone() for t in tensors])
    finally:
        torch.set_num_threads(before)
    return out


def _same(results):
    first = results[0]
    for k, other in zip(THREADS[1:], results[1:]):
        for i, (a, b) in enumerate(zip(first, other)):
            assert torch.equal(a, b), f"result {i} differs between 1 and {k} threads"


def _leaf(*shape, dtype=torch.float32, scale=1.0):
    g = torch.Generator().manual_seed(sum(shape))
    return (torch.randn(*shape, generator=g, dtype=dtype) * scale).requires_grad_()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_layernorm(dtype):
    m = tnn.LayerNorm(200).to(dtype)
    with torch.no_grad():
        m.weight.normal_()
        m.bias.normal_()
    x = _leaf(37, 200, dtype=dtype)
    _same(_bits(lambda: m(x), x, m.weight, m.bias))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_attention(dtype):
    """The attention core (CausalSelfAttention's projections are BLAS: not compared)."""
    qkv = _leaf(3, 9, 3, 4, 8, dtype=dtype)
    _same(_bits(lambda: builtin_ops.attention(qkv)[0], qkv))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_softmax_crossentropy_gelu_residual(dtype):
    x = _leaf(33, 70, dtype=dtype)
    _same(_bits(lambda: tnn.Softmax(dim=-1)(x), x))
    logits = _leaf(41, 300, dtype=dtype, scale=3.0)
    targets = torch.randint(0, 300, (41,), generator=torch.Generator().manual_seed(3))
    targets[5] = -100
    _same(_bits(lambda: tnn.CrossEntropyLoss()(logits, targets), logits))
    y = _leaf(10007, dtype=dtype)
    _same(_bits(lambda: tnn.GELU(approximate="tanh")(y), y))
    _same(_bits(lambda: tnn.GELU()(y), y))
    a, b = _leaf(5003, dtype=dtype), _leaf(5003, dtype=dtype, scale=2.0)
    _same(_bits(lambda: builtin_ops.residual(a, b), a, b))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_embedding_and_encoder_scatter(dtype):
    """Rows that repeat a token add into one row of the table: partial sums, the same bits."""
    g = torch.Generator().manual_seed(5)
    idx = torch.randint(0, 7, (50,), generator=g)            # many repeats
    m = tnn.Embedding(7, 16).to(dtype)
    _same(_bits(lambda: m(idx), m.weight))
    wte, wpe = _leaf(7, 16, dtype=dtype), _leaf(12, 16, dtype=dtype)
    tok = torch.randint(0, 7, (5, 12), generator=g)
    _same(_bits(lambda: builtin_ops.encoder(tok, wte, wpe), wte, wpe))
    # and they are right: torch's embedding
    wte_r, wpe_r = wte.detach().clone().requires_grad_(), wpe.detach().clone().requires_grad_()
    seed = torch.linspace(-1, 1, 5 * 12 * 16, dtype=dtype).reshape(5, 12, 16)
    (torch.nn.functional.embedding(tok, wte_r) + wpe_r[:12]).backward(seed)
    wte.grad = wpe.grad = None
    builtin_ops.encoder(tok, wte, wpe).backward(seed)
    torch.testing.assert_close(wte.grad, wte_r.grad)
    torch.testing.assert_close(wpe.grad, wpe_r.grad)


def test_linear_bias_gradient_bits():
    """Matmul's bias sum (the custom derivative's own loop: partial sums by blocks of rows
    fixed by the shape, added in block order) keeps its bits; 200 rows: three whole blocks of
    64 and a part; 9000 rows: 64 blocks of 141 rows."""
    for rows, features in ((200, 300), (9000, 40)):
        m = tnn.Linear(64, features)
        x = _leaf(rows, 64)
        res = _bits(lambda: m(x), m.bias)
        for other in res[1:]:
            assert torch.equal(res[0][1], other[1])
        seed = torch.linspace(-1, 1, rows * features).reshape(rows, features)  # _bits' seed
        # every row counted once (a block missed or doubled is off by ~1): float32 rounding only
        torch.testing.assert_close(res[0][1].double(), seed.double().sum(0), rtol=0,
                                   atol=1e-6 * rows)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_llama_layers(dtype):
    """RMSNorm (its d weight is summed over rows: partial sums per fixed chunk), SiLU, SwiGLU
    and rotary embedding keep their bits at 1, 2 and 3 threads."""
    m = tnn.RMSNorm(200).to(dtype)
    with torch.no_grad():
        m.weight.normal_()
    x = _leaf(37, 200, dtype=dtype)
    _same(_bits(lambda: m(x), x, m.weight))
    y = _leaf(10007, dtype=dtype)
    _same(_bits(lambda: tnn.SiLU()(y), y))
    z = _leaf(31, 2 * 70, dtype=dtype)
    _same(_bits(lambda: tnn.SwiGLU()(z), z))
    rope = tnn.RotaryEmbedding(16, max_seq_len=32, dtype=dtype)
    q = _leaf(3, 29, 5, 16, dtype=dtype)
    _same(_bits(lambda: rope(q), q))
