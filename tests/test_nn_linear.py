"""torchclad.nn.Linear: matmul_forward (BLAS) and its custom derivative, csrc/custom/matmul.cpp."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from nn_helpers import ATOL, LEADING, RTOL, gradcheck_module

import torchclad.nn as tnn
from torchclad.builtin import registry as kernels
from torchclad.builtin import ops as builtin_ops
from torchclad.testing import assert_parity

ROOT = Path(__file__).resolve().parent.parent


def test_constructor_state_dict_and_init_like_torch():
    torch.manual_seed(0)
    ref = torch.nn.Linear(5, 3)
    torch.manual_seed(0)
    ours = tnn.Linear(5, 3)
    assert list(ours.state_dict()) == list(ref.state_dict()) == ["weight", "bias"]
    assert torch.equal(ours.weight, ref.weight) and torch.equal(ours.bias, ref.bias)
    assert repr(ours) == "Linear(in_features=5, out_features=3, bias=True)"
    nb = tnn.Linear(5, 3, bias=False)
    assert nb.bias is None and list(nb.state_dict()) == ["weight"]
    assert tnn.Linear(2, 2, dtype=torch.float64).weight.dtype == torch.float64
    ours.load_state_dict(ref.state_dict())


@pytest.mark.parametrize("bias", [True, False])
def test_gradcheck_float64(bias):
    assert gradcheck_module(tnn.Linear(4, 3, bias=bias), torch.randn(2, 5, 4))


@pytest.mark.parametrize("bias", [True, False])
def test_float32_parity(bias):
    x = torch.randn(4, 16, 32)
    errors = assert_parity(torch.nn.Linear(32, 24, bias=bias), tnn.Linear(32, 24, bias=bias), x,
                           rtol=RTOL, atol=ATOL)
    assert "grad of parameter 'weight'" in errors and "grad of input 0" in errors
    assert ("grad of parameter 'bias'" in errors) == bias


@pytest.mark.parametrize("lead", LEADING)
def test_leading_dims_and_zero_size(lead):
    assert_parity(torch.nn.Linear(6, 5), tnn.Linear(6, 5), torch.randn(*lead, 6),
                  rtol=RTOL, atol=ATOL)


@pytest.mark.filterwarnings("ignore:Initializing zero-element tensors")
def test_degenerate_features():
    # in_features = 0: out = bias; out_features = 0: empty output; both still differentiable
    assert_parity(torch.nn.Linear(0, 3), tnn.Linear(0, 3), torch.randn(4, 0))
    assert_parity(torch.nn.Linear(3, 0), tnn.Linear(3, 0), torch.randn(4, 3))


def test_noncontiguous_input_and_weight():
    lin = tnn.Linear(6, 4, dtype=torch.float64)
    ref = torch.nn.Linear(6, 4, dtype=torch.float64)
    x = torch.randn(6, 10, dtype=torch.float64).t()[::2]
    assert not x.is_contiguous()
    assert_parity(ref, lin, x, rtol=1e-12, atol=1e-12)


def test_bad_inputs():
    lin = tnn.Linear(4, 3)
    with pytest.raises(ValueError, match="last dimension is 5, expected in_features = 4"):
        lin(torch.randn(2, 5))
    with pytest.raises(ValueError, match="at least 1 dimension[ ,]"):
        lin(torch.tensor(1.0))
    with pytest.raises(TypeError, match="must be a float32 tensor.*got float64"):
        lin(torch.randn(2, 4, dtype=torch.float64))
    with pytest.raises(TypeError, match="got int64"):
        lin(torch.arange(8).reshape(2, 4))
    with pytest.raises(ValueError, match="CPU only"):
        lin(torch.randn(2, 4, device="meta"))
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        lin([1.0, 2.0, 3.0, 4.0])
    with pytest.raises(ValueError, match="CPU only"):
        tnn.Linear(2, 2, device="meta")
    with pytest.raises(TypeError, match="float32 or torch.float64"):
        tnn.Linear(2, 2, dtype=torch.float16)
    with pytest.raises(ValueError, match="non-negative int"):
        tnn.Linear(-1, 2)


def test_opcheck():
    for dtype in (torch.float32, torch.float64):
        x = torch.randn(5, 7, dtype=dtype, requires_grad=True)
        w = torch.randn(3, 7, dtype=dtype, requires_grad=True)
        b = torch.randn(3, dtype=dtype, requires_grad=True)
        torch.library.opcheck(builtin_ops.matmul, (x, w, b))
        torch.library.opcheck(builtin_ops.matmul, (x, w, x.new_empty(0)))


# ---- the hard rule: the only hand-written derivative is matmul's, and it is the one used

def test_matmul_backward_is_the_custom_derivative():
    from torchclad import engine as ad

    spec = next(s for s in kernels.KERNELS if s.name == "matmul_forward")
    assert spec.sources == ("kernels/matmul.cpp", "custom/matmul.cpp")
    d = ad.differentiate(kernels.unit_source(spec), "matmul_forward", list(spec.wrt))
    funcs = dict(d.functions)
    sweep = funcs["matmul_forward_reverse_sweep"]
    assert "clad::custom_derivatives::matmul_forward_pullback(" in sweep
    assert "matmul_forward(" in funcs["matmul_forward_reverse_forw"]


def test_only_matmul_has_a_hand_written_derivative():
    csrc = ROOT / "csrc"
    holders = sorted(str(p.relative_to(csrc)) for p in csrc.rglob("*.cpp")
                     if "custom_derivatives" in p.read_text() and "kernels" not in p.parts)
    assert holders == ["custom/matmul.cpp"]
    for p in (csrc / "kernels").glob("*.cpp"):
        text = p.read_text()
        assert "namespace custom_derivatives" not in text, p
        assert "_pullback(" not in text.replace("matmul_forward_pullback", ""), p


def test_unit_source_and_link_requirements():
    from torchclad.toolchain import compiler

    spec = next(s for s in kernels.KERNELS if s.name == "matmul_forward")
    text = kernels.unit_source(spec)
    assert text.index("void matmul_forward(") < text.index('#line 1 "csrc/custom/matmul.cpp"')
    assert spec.libraries == ("torch_cpu",)
    d, lib = compiler.external_library("torch_cpu")
    assert lib == "torch_cpu" and any(Path(d).glob("libtorch_cpu.*"))
    with pytest.raises(compiler.BuildError, match="unknown external library 'nope'"):
        compiler.external_library("nope")
    gelu = next(s for s in kernels.KERNELS if s.name == "gelu_forward")
    assert kernels.unit_source(gelu) == (kernels.kernel_dir() / "gelu.cpp").read_text()


def test_aot_generate_builds_multi_file_units(tmp_path):
    """KernelSpec.sources: the unit's text is its files concatenated (with #line markers)."""
    from dataclasses import replace

    from torchclad import engine as ad
    from torchclad.toolchain import aot

    csrc = tmp_path / "csrc"
    (csrc / "kernels").mkdir(parents=True)
    (csrc / "custom").mkdir()
    (csrc / "kernels" / "sq.cpp").write_text(
        "template <typename T>\nvoid sq(T* y, const T* x, int n) {\n"
        "    for (int i = 0; i < n; i++) y[i] = x[i] * x[i];\n}\n")
    (csrc / "custom" / "note.cpp").write_text("// appended after the kernel\n")
    spec = kernels.KernelSpec(file="sq.cpp", name="sq", wrt=("x",),
                              sources=("kernels/sq.cpp", "custom/note.cpp"))
    read = lambda s: kernels.unit_source(s, csrc)  # noqa: E731
    aot.generate(tmp_path / "gen", [spec], kernel_dir=csrc / "kernels",
                 differentiate=ad.differentiate, read_source=read)
    text = (tmp_path / "gen" / "sq.cpp").read_text()
    assert text.index("void sq(") < text.index('#line 1 "csrc/custom/note.cpp"') < \
        text.index("sq_reverse_sweep")
    other = replace(spec, name="sq_again", sources=())
    with pytest.raises(ValueError, match="list different sources"):
        aot.generate(tmp_path / "gen2", [spec, other], kernel_dir=csrc / "kernels",
                     differentiate=ad.differentiate, read_source=read)
