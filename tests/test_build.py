"""Build step: pybind11 glue, JIT compile of a translation unit, the AOT extension torchclad._C.

Compiles are kept few and small (-O0 where the flags do not matter) and run serially.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from torchclad.toolchain import BuildError, GlueError, glue, load, make_tu

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------------------------
# A Derivative stand-in with the fields of docs/internals.md; tests of the glue must not depend
# on the engine.


@dataclass(frozen=True)
class FakeParam:
    name: str
    base: str
    pointer: int = 0
    const: bool = False
    differentiable: bool = True

    def c_type(self, scalar=None):
        base = scalar if scalar is not None and self.base in ("T",) else self.base
        return ("const " if self.const else "") + base + ("*" if self.pointer else "")


@dataclass(frozen=True)
class FakeDerivative:
    name: str
    params: tuple
    return_type: FakeParam
    wrt: tuple
    template_params: tuple
    code: str
    source: str = field(default="", repr=False)

    def translation_unit(self):
        return "#include <torchclad/runtime.h>\n" + self.source + "\n" + self.code


VOID = FakeParam("", "void")

SCALE_SRC = """
template <typename T>
void scale(T* out, const T* inp, T a, int N) {
    for (int i = 0; i < N; i++) out[i] = a * inp[i] * inp[i];
}
"""
# Hand-written in the shape the engine generates (docs/internals.md).
SCALE_CODE = """
template <typename T>
void scale_pullback(T* out, const T* inp, T a, int N, T* _d_out, T* _d_inp, T* _d_a) {
    for (int i = 0; i < N; i++) out[i] = a * inp[i] * inp[i];
    for (int i = N - 1; i >= 0; i--) {
        T _r_d0 = _d_out[i];
        _d_out[i] = 0;
        *_d_a += _r_d0 * inp[i] * inp[i];
        _d_inp[i] += 2 * a * inp[i] * _r_d0;
    }
}
template <typename T>
void scale_reverse_forw(T* out, const T* inp, T a, int N, torchclad::Tape& _tape) {
    for (int i = 0; i < N; i++) { _tape.push(out[i]); out[i] = a * inp[i] * inp[i]; }
}
template <typename T>
void scale_reverse_sweep(T* out, const T* inp, T a, int N, T* _d_out, T* _d_inp, T* _d_a,
                         torchclad::Tape& _tape) {
    for (int i = N - 1; i >= 0; i--) {
        out[i] = _tape.pop<T>();
        T _r_d0 = _d_out[i];
        _d_out[i] = 0;
        *_d_a += _r_d0 * inp[i] * inp[i];
        _d_inp[i] += 2 * a * inp[i] * _r_d0;
    }
}
"""


def scale_derivative(code=SCALE_CODE, wrt=("out", "inp", "a")):
    return FakeDerivative(
        name="scale",
        params=(FakeParam("out", "T", 1), FakeParam("inp", "T", 1, const=True),
                FakeParam("a", "T"), FakeParam("N", "int", differentiable=False)),
        return_type=VOID,
        wrt=wrt,
        template_params=("T",),
        code=code,
        source=SCALE_SRC,
    )


def dot_derivative():
    """Non-template, non-void: double dot(const double* x, double y, int n)."""
    return FakeDerivative(
        name="dot",
        params=(FakeParam("x", "double", 1, const=True), FakeParam("y", "double"),
                FakeParam("n", "int", differentiable=False)),
        return_type=FakeParam("", "double"),
        wrt=("x", "y"),
        template_params=(),
        code="/* generated */\n",
        source="double dot(const double* x, double y, int n) { return 0; }\n",
    )


def addr(a: np.ndarray) -> int:
    return a.ctypes.data


# ---------------------------------------------------------------------------------------------
# Glue text


def test_glue_template_binds_float_and_double():
    text = glue.bindings("scale", [scale_derivative()])
    for sfx in ("f32", "f64"):
        for fn in ("scale", "scale_pullback", "scale_reverse_forw", "scale_reverse_sweep"):
            assert f'm.def("{fn}_{sfx}"' in text
    assert "_grad_" not in text  # void primal: no _grad ...
    assert "_grad_" in glue.bindings("dot", [dot_derivative()])  # ... a non-void one has it
    assert "scale_pullback<float>(" in text and "scale_pullback<double>(" in text
    assert "reinterpret_cast<const float*>(a1)" in text  # pointer params arrive as addresses
    assert "reinterpret_cast<float*>(d2)" in text  # the scalar adjoint _d_a is a pointer too
    assert text.count("py::call_guard<py::gil_scoped_release>()") == text.count("m.def(")
    module = glue.module_init("_m", ["scale"], declare=True)
    assert 'py::class_<torchclad::Tape>(m, "Tape", py::module_local())' in module
    for method in ("size_bytes", "empty", "clear"):
        assert f'.def("{method}"' in module


def test_glue_nontemplate_binds_declared_type_only_and_grad_for_nonvoid():
    d = dot_derivative()
    assert glue.scalar_types(d) == ("double",)
    text = glue.bindings("dot", [d])
    for fn in ("dot", "dot_pullback", "dot_grad", "dot_reverse_forw", "dot_reverse_sweep"):
        assert f'm.def("{fn}_f64"' in text
    assert "_f32" not in text
    assert "dot_pullback(" in text and "<double>" not in text
    template = glue.bindings("scale", [scale_derivative()])  # where both spellings do occur
    assert "_f32" in template and "scale_pullback<double>(" in template
    assert "double dy" in text  # the seed _d_y is a number


def test_glue_rejects_kernel_without_floating_type():
    d = FakeDerivative("f", (FakeParam("n", "int"),), FakeParam("", "int"), (), (), "")
    with pytest.raises(GlueError, match="float or double"):
        glue.scalar_types(d)


def test_make_tu_merges_derivatives_of_one_source_and_rejects_mixed_sources():
    a = scale_derivative()
    b = FakeDerivative("scale2", a.params, VOID, ("inp",), ("T",), "// code of scale2\n",
                       source=SCALE_SRC)
    tu = make_tu([a, b], name="scale")
    assert tu.text.count("void scale(") == 1  # the user source once
    assert tu.text.endswith("// code of scale2\n") and SCALE_CODE in tu.text
    assert [d.name for d in tu.derivatives] == ["scale", "scale2"]
    other = FakeDerivative("other", a.params, VOID, ("inp",), ("T",), "// x\n", source="// other\n")
    with pytest.raises(GlueError, match="different sources"):
        make_tu([a, other])
    with pytest.raises(GlueError, match="appear twice"):
        make_tu([a, a])


# ---------------------------------------------------------------------------------------------
# JIT


def test_jit_glue_compiles_and_runs(tmp_path):
    m = load(scale_derivative(), cache_dir=tmp_path / "cache", extra_cflags=["-O0"])
    assert Path(m.__torchclad_source__).is_file()
    x = np.linspace(-1, 1, 7)
    for dtype, sfx in ((np.float32, "f32"), (np.float64, "f64")):
        inp = x.astype(dtype)
        out = np.zeros_like(inp)
        getattr(m, f"scale_{sfx}")(addr(out), addr(inp), 3.0, inp.size)  # the primal
        np.testing.assert_allclose(out, 3 * inp * inp, rtol=1e-6)

        d_out, d_inp, d_a = np.ones_like(inp), np.zeros_like(inp), np.zeros(1, dtype)
        getattr(m, f"scale_pullback_{sfx}")(addr(out), addr(inp), 3.0, inp.size,
                                            addr(d_out), addr(d_inp), addr(d_a))
        np.testing.assert_allclose(d_inp, 6 * inp, rtol=1e-6)
        np.testing.assert_allclose(d_a[0], np.sum(inp * inp), rtol=1e-5)

        tape = m.Tape()
        out2 = np.full_like(inp, 5)
        getattr(m, f"scale_reverse_forw_{sfx}")(addr(out2), addr(inp), 3.0, inp.size, tape)
        assert not tape.empty() and tape.size_bytes() > 0
        d_out, d_inp2, d_a2 = np.ones_like(inp), np.zeros_like(inp), np.zeros(1, dtype)
        getattr(m, f"scale_reverse_sweep_{sfx}")(addr(out2), addr(inp), 3.0, inp.size,
                                                 addr(d_out), addr(d_inp2), addr(d_a2), tape)
        assert tape.empty()
        np.testing.assert_array_equal(d_inp2, d_inp)
        np.testing.assert_array_equal(out2, np.full_like(inp, 5))  # restored from the tape


def test_compile_error_has_stderr_and_kept_source(tmp_path):
    bad = scale_derivative(code=SCALE_CODE + "\nthis is not C++;\n")
    with pytest.raises(BuildError) as info:
        load(bad, cache_dir=tmp_path / "cache", extra_cflags=["-O0"])
    msg = str(info.value)
    assert "error" in msg and "this is not C++" in msg  # the compiler's stderr
    kept = Path(info.value.source)
    assert str(kept) in msg and kept.is_file() and "this is not C++" in kept.read_text()


# ---------------------------------------------------------------------------------------------
# With the engine


def gelu_ref(x):
    s = math.sqrt(2 / math.pi)
    t = np.tanh(s * (x + 0.044715 * x**3))
    y = 0.5 * x * (1 + t)
    dydx = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * s * (1 + 3 * 0.044715 * x * x)
    return y, dydx


def check_gelu_module(m, adjoints):
    """Primal, pullback and split mode of gelu_forward in module m against the closed form."""
    x = np.linspace(-4, 4, 33)
    y_ref, dydx = gelu_ref(x)
    assert set(adjoints) == {"inp", "out"}  # wrt=("inp",), plus the output's adjoint (the seed)
    for dtype, sfx, tol in ((np.float32, "f32", 1e-5), (np.float64, "f64", 1e-12)):
        inp = x.astype(dtype)
        out = np.zeros_like(inp)
        getattr(m, f"gelu_forward_{sfx}")(addr(out), addr(inp), inp.size)
        np.testing.assert_allclose(out, y_ref, rtol=tol, atol=tol)
        g = np.linspace(0.5, 1.5, inp.size).astype(dtype)

        adj = {"out": g.copy(), "inp": np.zeros_like(inp)}
        getattr(m, f"gelu_forward_pullback_{sfx}")(
            addr(out), addr(inp), inp.size, *(addr(adj[a]) for a in adjoints))
        np.testing.assert_allclose(adj["inp"], g * dydx, rtol=10 * tol, atol=10 * tol)

        tape = m.Tape()
        out2 = np.zeros_like(inp)
        getattr(m, f"gelu_forward_reverse_forw_{sfx}")(addr(out2), addr(inp), inp.size, tape)
        np.testing.assert_array_equal(out2, out)
        adj2 = {"out": g.copy(), "inp": np.zeros_like(inp)}
        getattr(m, f"gelu_forward_reverse_sweep_{sfx}")(
            addr(out2), addr(inp), inp.size, *(addr(adj2[a]) for a in adjoints), tape)
        assert tape.empty()
        np.testing.assert_array_equal(adj2["inp"], adj["inp"])


TWO_FUNCTIONS = """
template <typename T> T sq(T x) { return x * x; }
template <typename T> void squares(T* out, const T* a, int n) {
    for (int i = 0; i < n; i++) out[i] = sq(a[i]);
}
template <typename T> T sumsq(const T* a, int n) {
    T s = T(0);
    for (int i = 0; i < n; i++) s += sq(a[i]);
    return s;
}
"""


def test_jit_real_engine_two_functions_of_one_source(tmp_path):
    """Two derivatives of one source (sharing the callee sq) compile as one translation unit."""
    from torchclad.engine import differentiate

    d1 = differentiate(TWO_FUNCTIONS, "squares", "a", filename="two.cpp")
    d2 = differentiate(TWO_FUNCTIONS, "sumsq", "a", filename="two.cpp")
    tu = make_tu([d1, d2], name="two")
    assert tu.text.count("T sq(T x)") == 1
    m = load(tu, cache_dir=tmp_path / "cache", extra_cflags=["-O0"])
    assert list(m.__torchclad_kernels__) == ["squares", "sumsq"]
    a = np.array([1.0, -2.0, 3.0])
    assert m.sumsq_f64(addr(a), 3) == 14.0
    da = np.zeros(3)
    m.sumsq_grad_f64(addr(a), 3, addr(da))
    np.testing.assert_array_equal(da, 2 * a)
    assert d1.adjoints == ("a", "out")
    out, d_out, da = np.zeros(3, np.float32), np.ones(3, np.float32), np.zeros(3, np.float32)
    a32 = a.astype(np.float32)
    m.squares_pullback_f32(addr(out), addr(a32), 3, addr(da), addr(d_out))
    np.testing.assert_array_equal(da, 2 * a32)


# ---------------------------------------------------------------------------------------------
# AOT: torchclad._C, built by `make install`


def test_aot_extension_has_every_kernel_binding():
    import torchclad._C as C
    from torchclad.builtin.registry import KERNELS

    for spec in KERNELS:
        for sfx in ("f32", "f64"):
            for fn in ("", "_pullback", "_reverse_forw", "_reverse_sweep"):
                assert hasattr(C, f"{spec.name}{fn}_{sfx}"), f"{spec.name}{fn}_{sfx}"
        assert spec.name in C.__torchclad_kernels__
    tape = C.Tape()
    assert tape.empty() and tape.size_bytes() == 0
    sig = C.__torchclad_signatures__["gelu_forward"]  # recorded at build time
    assert [p.name for p in sig.params] == ["out", "inp", "N"]
    assert sig.wrt == ("inp",) and sig.template_params == ("T",)
    assert [p.c_type("float") for p in sig.params] == ["float*", "const float*", "int"]
    check_gelu_module(C, sig.adjoints)


def test_aot_generated_sources_are_readable():
    from torchclad.toolchain import generated_dir
    from torchclad.builtin.registry import KERNELS

    for spec in KERNELS:
        unit = generated_dir() / f"{spec.unit}.cpp"
        assert unit.is_file(), f"{unit} missing: run `make install`"
        text = unit.read_text()
        assert f"{spec.name}_pullback" in text and f"{spec.name}_reverse_sweep" in text
        assert "#include <torchclad/runtime.h>" in text
    assert (generated_dir() / "_C_module.cpp").is_file()


def test_import_compiles_nothing(tmp_path):
    """Importing the installed extension must not run a compiler nor touch the JIT cache."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    marker = tmp_path / "compiler-was-called"
    for tool in ("g++", "c++", "gcc", "cc", "clang++"):
        p = bindir / tool
        p.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
        p.chmod(0o755)
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
               CXX=str(bindir / "g++"), TORCHCLAD_CACHE_DIR=str(tmp_path / "cache"))
    code = textwrap.dedent("""
        import torchclad, torchclad._C as C
        assert hasattr(C, "gelu_forward_pullback_f32")
        print(C.__file__)
    """)
    r = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert not marker.exists()  # no compiler ran (the wrappers would have touched it)
    assert not (tmp_path / "cache").exists()


def test_package_flags_undo_pythons_fwrapv():
    # setuptools compiles with Python's own CFLAGS first (-fwrapv on CPython builds), then the
    # package's: -fno-wrapv must be among them, or g++ vectorises the generated sweeps' int
    # index arithmetic less (the attention sweep ran 2.3x slower; README, Performance).
    import sysconfig

    from torchclad.toolchain import compiler

    if "-fwrapv" in (sysconfig.get_config_var("CFLAGS") or "").split():
        assert "-fno-wrapv" in compiler.CXXFLAGS
    assert "-fwrapv" not in compiler.CXXFLAGS
