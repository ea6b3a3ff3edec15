"""Bad inputs raise Python exceptions that name the argument, what was expected and what arrived
(issue "Reliability and security"), for every module and for torchclad.function ops: wrong dtype
(integer, bool, float16, bfloat16, complex), wrong device (meta tensors and parameters, 'cuda'
without CUDA), wrong rank or size, token ids / targets out of range, T > block_size,
n_embd % n_head != 0. The per-module test files check some of these messages one by one; this
file sweeps every combination. No kernel ever runs on such an input.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
import torch

import torchclad
import torchclad.nn as tnn
from torchclad.nn.gpt2 import TokenIndexError

CFG = SimpleNamespace(n_embd=8, n_head=2, block_size=4, bias=True, dropout=0.0)
GCFG = tnn.GPT2Config(block_size=4, vocab_size=11, n_layer=1, n_head=2, n_embd=8)


def raises_naming(exc, *fragments):
    """pytest.raises(exc) whose message contains every fragment (regex-escaped, in any order)."""
    return pytest.raises(exc, match="".join(f"(?=[\\s\\S]*{re.escape(f)})" for f in fragments))


# (name, module factory, shape of a good float input)
FLOAT_MODULES = [
    ("Linear", lambda: tnn.Linear(8, 3), (2, 8), "Linear"),
    ("LayerNorm", lambda: tnn.LayerNorm(8), (2, 8), "LayerNorm"),
    ("GELU", lambda: tnn.GELU(), (2, 8), "GELU"),
    ("GELU-tanh", lambda: tnn.GELU("tanh"), (2, 8), "GELU"),
    ("Softmax", lambda: tnn.Softmax(-1), (2, 8), "Softmax"),
    ("CausalSelfAttention", lambda: tnn.CausalSelfAttention(CFG), (2, 3, 8), "CausalSelfAttention"),
    ("MLP", lambda: tnn.MLP(CFG), (2, 8), "Linear"),          # its first layer reports
    ("Block", lambda: tnn.Block(CFG), (2, 3, 8), "LayerNorm"),  # its first layer reports
]
IDS = [m[0] for m in FLOAT_MODULES]
WITH_PARAMS = ("Linear", "LayerNorm", "CausalSelfAttention", "MLP", "Block")
BAD_DTYPES = [torch.int64, torch.int32, torch.bool, torch.float16, torch.bfloat16, torch.complex64]


@pytest.mark.parametrize("dtype", BAD_DTYPES, ids=str)
@pytest.mark.parametrize("name,make,shape,owner", FLOAT_MODULES, ids=IDS)
def test_float_input_of_wrong_dtype(name, make, shape, owner, dtype):
    dt = str(dtype).removeprefix("torch.")
    with raises_naming(TypeError, f"{owner}:", "input", "float32", f"got {dt}"):
        make()(torch.zeros(shape, dtype=dtype))


@pytest.mark.parametrize("name,make,shape,owner", FLOAT_MODULES, ids=IDS)
def test_float_input_on_meta(name, make, shape, owner):
    with raises_naming(ValueError, f"{owner}:", "input", "on meta", "CPU only"):
        make()(torch.zeros(shape, device="meta"))


@pytest.mark.parametrize("convert", ["half", "bfloat16", "meta"])
@pytest.mark.parametrize("name,make,shape,owner", [m for m in FLOAT_MODULES if m[0] in WITH_PARAMS],
                         ids=[n for n in IDS if n in WITH_PARAMS])
def test_parameters_of_wrong_dtype_or_device(name, make, shape, owner, convert):
    m = make()
    if convert == "meta":
        m = m.to("meta")
        with raises_naming(ValueError, f"{owner}:", "parameter '", "on meta", "CPU only"):
            m(torch.zeros(shape))
        return
    m = m.half() if convert == "half" else m.to(torch.bfloat16)
    want = "float16" if convert == "half" else "bfloat16"
    dtype = torch.float16 if convert == "half" else torch.bfloat16
    with raises_naming(TypeError, f"{owner}:", "parameter '", f"is {want}", "float32 or float64"):
        m(torch.zeros(shape, dtype=dtype))
    with pytest.raises(TypeError, match=f"{owner}: .*(float32|{want})"):  # a float32 input too
        m(torch.zeros(shape))


@pytest.mark.parametrize("device", ["cuda", "cuda:0", torch.device("cuda")], ids=str)
@pytest.mark.parametrize("ctor", [tnn.Linear, tnn.LayerNorm, tnn.Embedding], ids=lambda c: c.__name__)
def test_constructor_device_cuda_without_cuda(ctor, device):
    args = (4,) if ctor is tnn.LayerNorm else (4, 3)
    with raises_naming(ValueError, f"{ctor.__name__}:", "device=", "cuda", "CPU only"):
        ctor(*args, device=device)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int64], ids=str)
@pytest.mark.parametrize("ctor", [tnn.Linear, tnn.LayerNorm, tnn.Embedding], ids=lambda c: c.__name__)
def test_constructor_dtype(ctor, dtype):
    args = (4,) if ctor is tnn.LayerNorm else (4, 3)
    with raises_naming(TypeError, f"{ctor.__name__}:", "dtype must be torch.float32 or torch.float64",
                       f"got {dtype}"):
        ctor(*args, dtype=dtype)


def test_cross_entropy_dtypes_and_devices():
    ce = tnn.CrossEntropyLoss()
    t = torch.tensor([0, 1])
    for dtype in (torch.int64, torch.float16, torch.bfloat16):
        dt = str(dtype).removeprefix("torch.")
        with raises_naming(TypeError, "CrossEntropyLoss:", "input", "float32 or float64", f"got {dt}"):
            ce(torch.zeros(2, 3, dtype=dtype), t)
    for dtype in (torch.int16, torch.uint8, torch.bool):
        dt = str(dtype).removeprefix("torch.")
        with raises_naming(TypeError, "CrossEntropyLoss:", "target", "int64", f"got {dt}"):
            ce(torch.zeros(2, 3), t.to(dtype))
    for dtype in (torch.float32, torch.bfloat16):
        with raises_naming(NotImplementedError, "CrossEntropyLoss", "target", "int64"):
            ce(torch.zeros(2, 3), t.to(dtype))
    with raises_naming(ValueError, "CrossEntropyLoss:", "input", "on meta", "CPU only"):
        ce(torch.zeros(2, 3, device="meta"), t)
    with raises_naming(ValueError, "CrossEntropyLoss:", "target", "on meta", "CPU only"):
        ce(torch.zeros(2, 3), t.to("meta"))


def test_embedding_dtypes_and_devices():
    emb = tnn.Embedding(5, 3)
    for dtype in (torch.float32, torch.float16, torch.int16, torch.uint8, torch.bool):
        dt = str(dtype).removeprefix("torch.")
        with raises_naming(TypeError, "Embedding:", "input", "int64", f"got {dt}"):
            emb(torch.tensor([0, 1]).to(dtype))
    with raises_naming(ValueError, "Embedding:", "input", "on meta", "CPU only"):
        emb(torch.tensor([0, 1], device="meta"))
    with raises_naming(TypeError, "Embedding:", "parameter 'weight'", "float16", "float32 or float64"):
        tnn.Embedding(5, 3).half()(torch.tensor([0, 1]))
    with raises_naming(ValueError, "Embedding:", "parameter 'weight'", "on meta", "CPU only"):
        tnn.Embedding(5, 3).to("meta")(torch.tensor([0, 1]))


@pytest.mark.parametrize("fused", [False, True], ids=["modular", "fused"])
def test_gpt2_dtypes_devices_shapes_and_ids(fused):
    m = tnn.GPT2(GCFG, fused=fused)
    idx = torch.zeros(2, 3, dtype=torch.int64)
    for dtype in (torch.float32, torch.int16, torch.bool):
        dt = str(dtype).removeprefix("torch.")
        with raises_naming(TypeError, "GPT2:", "idx", "(B, T) int64", f"dtype {dt}"):
            m(idx.to(dtype))
    with raises_naming(TypeError, "GPT2:", "idx", "(B, T)", "shape (6,)"):
        m(idx.reshape(-1))
    with raises_naming(ValueError, "GPT2:", "idx", "on meta", "CPU only"):
        m(idx.to("meta"))
    with raises_naming(ValueError, "GPT2:", "targets", "on meta", "CPU only"):
        m(idx, idx.to("meta"))
    with raises_naming(TypeError, "GPT2:", "targets", "int64", "float32"):
        m(idx, idx.float())
    with raises_naming(ValueError, "GPT2:", "targets has shape (3, 2)", "expected", "(2, 3)"):
        m(idx, idx.t())
    with raises_naming(ValueError, "GPT2:", "sequence of length 5", "block_size is only 4"):
        m(torch.zeros(1, 5, dtype=torch.int64))
    with raises_naming(TokenIndexError, "GPT2:", "idx contains 11", "[0, 11)"):
        m(torch.tensor([[0, 11]]))
    with raises_naming(TokenIndexError, "GPT2:", "idx contains -1", "[0, 11)"):
        m(torch.tensor([[0, -1]]))
    with raises_naming(TokenIndexError, "GPT2:", "targets contains -2", "[0, 11) or -1"):
        m(torch.tensor([[0, 1]]), torch.tensor([[0, -2]]))
    with raises_naming(TokenIndexError, "GPT2:", "targets contains 11"):
        m(torch.tensor([[0, 1]]), torch.tensor([[11, 0]]))
    for convert, want in (("half", "float16"), ("bfloat16", "bfloat16")):
        bad = tnn.GPT2(GCFG, fused=fused)
        bad = bad.half() if convert == "half" else bad.to(torch.bfloat16)
        with raises_naming(TypeError, "GPT2:", "parameter 'transformer.wte.weight'", f"is {want}",
                           "float32 or float64"):
            bad(idx)
    with raises_naming(ValueError, "GPT2:", "parameter '", "on meta", "CPU only"):
        tnn.GPT2(GCFG, fused=fused).to("meta")(idx)


def test_wrong_rank_and_size():
    with raises_naming(ValueError, "Linear:", "input's last dimension is 5", "in_features = 8"):
        tnn.Linear(8, 3)(torch.zeros(2, 5))
    with raises_naming(ValueError, "Linear:", "input", "at least 1 dimension", "shape ()"):
        tnn.Linear(8, 3)(torch.tensor(1.0))
    with raises_naming(ValueError, "LayerNorm:", "last dimension is 7", "normalized_shape[-1] = 8"):
        tnn.LayerNorm(8)(torch.zeros(2, 7))
    with raises_naming(ValueError, "LayerNorm:", "input", "at least 2 dimensions", "(4,)"):
        tnn.LayerNorm((2, 4))(torch.zeros(4))
    with raises_naming(IndexError, "Softmax:", "dim 2", "[-2, 1]"):
        tnn.Softmax(2)(torch.zeros(2, 3))
    with raises_naming(ValueError, "CausalSelfAttention:", "last dimension is 6", "n_embd = 8"):
        tnn.CausalSelfAttention(CFG)(torch.zeros(1, 3, 6))
    with raises_naming(ValueError, "CausalSelfAttention:", "input", "at least 2 dimensions", "(8,)"):
        tnn.CausalSelfAttention(CFG)(torch.zeros(8))
    with raises_naming(ValueError, "Linear:", "last dimension is 6", "in_features = 8"):
        tnn.MLP(CFG)(torch.zeros(2, 6))
    with raises_naming(ValueError, "LayerNorm:", "last dimension is 6", "normalized_shape[-1] = 8"):
        tnn.Block(CFG)(torch.zeros(1, 3, 6))
    ce = tnn.CrossEntropyLoss()
    with raises_naming(ValueError, "CrossEntropyLoss:", "target has shape (3,)", "expected (2,)"):
        ce(torch.zeros(2, 5), torch.tensor([0, 1, 2]))
    with raises_naming(ValueError, "CrossEntropyLoss:", "target has shape (2,)", "expected (2, 4)"):
        ce(torch.zeros(2, 5, 4), torch.tensor([0, 1]))
    with raises_naming(ValueError, "CrossEntropyLoss:", "0 classes"):
        ce(torch.zeros(2, 0), torch.tensor([0, 0]))


def test_out_of_range_ids_and_targets():
    emb = tnn.Embedding(5, 3)
    for bad in (5, -1, 2**40):
        with raises_naming(IndexError, "Embedding:", f"index {bad}", "num_embeddings=5", "0 <= index < 5"):
            emb(torch.tensor([0, bad, 1]))
    with raises_naming(IndexError, "Embedding:", "index 7"):
        emb(torch.tensor([0, 7], dtype=torch.int32))
    ce = tnn.CrossEntropyLoss()
    for bad in (4, -1, -101):
        with raises_naming(IndexError, "CrossEntropyLoss:", f"target {bad}", "4 classes",
                           "ignore_index=-100"):
            ce(torch.zeros(3, 4), torch.tensor([0, bad, 1]))
    with raises_naming(IndexError, "CrossEntropyLoss:", "target -100", "ignore_index=3"):
        tnn.CrossEntropyLoss(ignore_index=3)(torch.zeros(2, 4), torch.tensor([3, -100]))


def test_block_size_and_heads():
    with raises_naming(ValueError, "CausalSelfAttention:", "sequence of length 5", "block_size is only 4"):
        tnn.CausalSelfAttention(CFG)(torch.zeros(1, 5, 8))
    with raises_naming(ValueError, "CausalSelfAttention:", "sequence of length 5", "block_size is only 4"):
        tnn.Block(CFG)(torch.zeros(1, 5, 8))
    bad = SimpleNamespace(n_embd=10, n_head=3, block_size=4, bias=True, dropout=0.0)
    for make in (tnn.CausalSelfAttention, tnn.Block):
        with raises_naming(ValueError, "n_embd (10)", "divisible by n_head (3)"):
            make(bad)
    with raises_naming(ValueError, "GPT2:", "n_embd (10)", "divisible by n_head (3)"):
        tnn.GPT2(tnn.GPT2Config(block_size=4, vocab_size=11, n_layer=1, n_head=3, n_embd=10))


def test_function_op_dtypes_and_devices():
    op = torchclad.function(
        "template <typename T> void sq(T* out, const T* x, int N) "
        "{ for (int i = 0; i < N; i++) out[i] = x[i] * x[i]; }",
        "sq", inputs=["x"], outputs={"out": _same_shape}, sizes={"N": _numel})
    for dtype in (torch.int64, torch.int32, torch.bool, torch.float16, torch.bfloat16):
        dt = str(dtype).removeprefix("torch.")
        with raises_naming(TypeError, "sq:", "input 'x'", f"{dt} tensor", "float32 or float64"):
            op(torch.ones(3, dtype=dtype))
    with raises_naming(ValueError, "sq:", "input 'x'", "on meta", "CPU only"):
        op(torch.ones(3, device="meta"))
    dbl = torchclad.function(
        "void cube(double* out, const double* x, int N) "
        "{ for (int i = 0; i < N; i++) out[i] = x[i] * x[i] * x[i]; }",
        "cube", inputs=["x"], outputs={"out": _same_shape}, sizes={"N": _numel})
    with raises_naming(TypeError, "cube:", "input 'x'", "const double*", "float64 tensor", "got float32"):
        dbl(torch.ones(3))


def _same_shape(x):
    return x.shape


def _numel(x):
    return x.numel()


def test_gpt2_names_the_parameter_a_layer_refuses():
    """The modular model does not walk its parameters before each step: the layer that refuses
    a parameter makes it name that parameter by its full name, the layer's error the cause."""
    m = tnn.GPT2(GCFG, fused=False)
    fc = m.transformer.h[0].mlp.c_fc
    fc.weight.data = fc.weight.data.double()
    with raises_naming(TypeError, "GPT2:", "parameters mix",
                       "transformer.h.0.mlp.c_fc.weight") as e:
        m(torch.zeros(1, 3, dtype=torch.int64))
    assert "Linear:" in str(e.value.__cause__)
