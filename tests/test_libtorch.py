"""``torchclad aot``: user kernels as LibTorch C++ ops, built with CMake against the installed
torch wheel's LibTorch and run as a C++ program with no Python (issue #19).

``test_generated_ops_in_cpp`` runs the command on the kernels of tests/libtorch/kernels (a loop
with reductions, two outputs, an integer index input, a custom derivative, an in-out array with
a float size, a --wrt subset), configures tests/libtorch once -- with examples/libtorch as a
subdirectory -- and builds every op, the check program and the example with -j2; then runs
tests/libtorch/check.cpp (outputs and gradients against the same math written with LibTorch
ops and torch::autograd in float32 and float64, against central finite differences in float64,
and the behaviour around them: input errors as c10::Error, ...) and the example's ctest checks.
The other tests are the command's refusals, which need no compiler.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "tests" / "libtorch"
KERNELS = HERE / "kernels"

# (kernel file, function, extra arguments of torchclad aot)
OPS = [
    ("lse_rows.cpp", "lse_rows", []),
    ("rownorm.cpp", "rownorm", []),
    ("rownorm.cpp", "rownorm", ["--wrt", "x", "--op", "rownorm_x"]),
    ("encoder.cpp", "encoder", []),
    ("softclip.cpp", "softclip_dot", []),
    ("axpy.cpp", "axpy_sq", []),
]
CASES = {"lse_rows": 2, "rownorm": 2, "encoder": 2, "softclip_dot": 2, "axpy_sq": 1}


def env() -> dict:
    """This checkout's torchclad first on the path (the CMake configure of the example runs
    ``python -m torchclad aot`` too)."""
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def aot(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchclad", "aot", *args], cwd=cwd, env=env(),
                          capture_output=True, text=True, timeout=600)


def cmake_configure_args(build: Path, source: Path, **defs: str) -> list[str]:
    import torch.utils

    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    return ["cmake", "-S", str(source), "-B", str(build), *gen,
            f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}", "-DCMAKE_BUILD_TYPE=Release",
            *(f"-D{k}={v}" for k, v in defs.items())]


def run(argv: list[str], what: str, timeout: int = 1800) -> str:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env())
    assert p.returncode == 0, f"{what} failed ({p.returncode}):\n{p.stdout[-6000:]}\n{p.stderr[-6000:]}"
    return p.stdout


def require_cmake() -> None:
    if shutil.which("cmake") is None:
        pytest.fail("cmake is not on PATH: the LibTorch tests build a CMake project "
                    "(install cmake >= 3.18)", pytrace=False)


def test_generated_ops_in_cpp(tmp_path):
    require_cmake()
    gen = tmp_path / "ops"
    for file, fn, extra in OPS:
        p = aot(str(KERNELS / file), "--fn", fn, "-o", str(gen), *extra)
        assert p.returncode == 0, f"torchclad aot {file} --fn {fn}: {p.stderr}"
    # the custom derivative is what the generated sweep calls
    soft = (gen / "softclip_dot.cpp").read_text()
    sweep = soft[soft.index("softclip_dot_reverse_sweep("):]
    assert "clad::custom_derivatives::softclip_pullback(" in sweep
    # the ops are self-contained: kernel, generated functions, runtime headers, CMake
    for name in ("lse_rows", "rownorm", "rownorm_x", "encoder", "softclip_dot", "axpy_sq"):
        src = (gen / f"{name}.cpp").read_text()
        assert "TORCH_LIBRARY_FRAGMENT(torchclad_ops" in src and "_reverse_sweep" in src
        assert f"{name}.cpp" in (gen / "CMakeLists.txt").read_text()
    assert {p.name for p in (gen / "torchclad").iterdir()} >= {"runtime.h", "tape.h", "math.h",
                                                               "libtorch.h"}
    # One configure, one -j2 build: these ops, check.cpp, and examples/libtorch (whose
    # configure runs torchclad aot on its kernels) share the runtime's compiled part.
    build = tmp_path / "build"
    run(cmake_configure_args(build, HERE, TORCHCLAD_OPS_DIR=str(gen),
                             TORCHCLAD_EXAMPLE_DIR=str(ROOT / "examples" / "libtorch"),
                             Python3_EXECUTABLE=sys.executable), "cmake configure")
    run(["cmake", "--build", str(build), "-j", "2"], "cmake --build")
    # examples/libtorch's checks, through ctest as its README says
    out = run(["ctest", "--test-dir", str(build), "--output-on-failure"], "ctest")
    assert "libtorch_example_gradients" in out and "libtorch_example_train" in out
    assert "100% tests passed" in out, out
    p = subprocess.run([str(build / "check")], capture_output=True, text=True, timeout=600)
    out = p.stdout
    failed = [ln for ln in out.splitlines() if ln.startswith("FAIL")]
    assert p.returncode == 0 and not failed, out + p.stderr
    for name, n_dtypes in CASES.items():
        assert f"ok {name} float64 gradients vs finite differences" in out
        assert f"ok {name} float64 gradients vs torch::autograd" in out
        if n_dtypes == 2:
            assert f"ok {name} float32 gradients vs torch::autograd" in out
    for line in ("ok error: dtypes differ", "ok error: device", "ok error: shape check",
                 "ok error: index out of range", "ok non-contiguous inputs",
                 "ok retain_graph: second backward", "ok double backward refused"):
        assert line in out
    m = re.search(r"checks: (\d+), failed: 0", out)
    assert m and int(m.group(1)) >= 45, out
    # an op's source compiled alone (no TORCHCLAD_SHARED_RUNTIME) runs, and defines the shared
    # runtime as inline functions only (weak symbols: several such ops link together)
    assert run([str(build / "standalone")], "standalone").strip() == "ok standalone op"
    obj = next(build.glob("CMakeFiles/standalone.dir/**/lse_rows.cpp.o"))
    syms = run(["nm", "-C", "--defined-only", str(obj)], "nm").splitlines()
    runtime = [ln.split(None, 2)[1:] for ln in syms if " torchclad::lt::" in ln]
    assert sum(kind == "W" for kind, _ in runtime) >= 10, runtime  # compiled in, weak
    assert not [name for kind, name in runtime if kind == "T"], runtime


@pytest.mark.parametrize("native", [False, True], ids=["default", "native"])
def test_native_option_sets_march_native_on_the_ops_only(tmp_path, native):
    """The generated CMakeLists.txt's TORCHCLAD_NATIVE (OFF by default) compiles the ops' sources
    with -march=native; without it nothing names an ISA (the program runs on any x86-64 CPU),
    and the shared runtime never gets it. Configure only, compile commands read back."""
    require_cmake()
    gen = tmp_path / "ops"
    p = aot(str(KERNELS / "lse_rows.cpp"), "--fn", "lse_rows", "-o", str(gen))
    assert p.returncode == 0, p.stderr
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(native_check CXX)\n"
        "find_package(Torch REQUIRED)\n"
        f"add_subdirectory({gen.as_posix()} ops)\n")
    build = tmp_path / "build"
    run(cmake_configure_args(build, proj, CMAKE_EXPORT_COMPILE_COMMANDS="ON",
                             TORCHCLAD_NATIVE="ON" if native else "OFF"), "cmake configure")
    commands = {Path(c["file"]).name: c["command"]
                for c in json.loads((build / "compile_commands.json").read_text())}
    assert ("-march=native" in commands["lse_rows.cpp"]) == native
    assert "-march" not in commands["libtorch.cpp"]
    if (gen / "torchclad" / "vecmath.h").exists():  # the vector math flags stay either way
        assert "-fno-math-errno" in commands["lse_rows.cpp"]
        assert "vecmath.h" in commands["lse_rows.cpp"]


# ---- the command's refusals (no compiler needed)


def test_aot_help_documents_the_spec():
    p = subprocess.run([sys.executable, "-m", "torchclad", "aot", "--help"], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert p.returncode == 0
    for word in ('"inputs"', '"outputs"', '"sizes"', "x.size(i)", "torchclad_ops",
                 "cmake_prefix_path", "add_subdirectory"):
        assert word in p.stdout


SRC = """
template <typename T>
void scale(T* out, const T* x, T a, int n) {
  for (int i = 0; i < n; i++) out[i] = a * x[i];
}
"""


@pytest.mark.parametrize("spec, message", [
    ({"inputs": ["x"], "outputs": {"out": "x.shape"}},
     "scalar parameter 'a' has no value"),
    ({"inputs": ["x"], "outputs": {"out": "x.shape"}, "sizes": {"a": 2.0, "n": "y.numel()"}},
     "'y' is neither an input (x) nor a size declared before"),
    ({"inputs": ["x"], "outputs": {"out": "x.shape"}, "sizes": {"a": 2.0, "n": "x"}},
     "'x' is a tensor; use x.size(i)"),
    ({"inputs": ["x"], "outputs": {"out": "x.numel() / 2"}, "sizes": {"a": 2.0, "n": "x.numel()"}},
     "/ between integers; use // (floor division)"),
    ({"inputs": ["x"], "outputs": {"out": "x.shape"}, "sizes": {"a": 2.0, "n": "x.numel()"},
      "checks": ["x.numel()"]},
     "is an integer; expected a condition"),
    ({"inputs": ["x"], "outputs": {"out": "x.shape"}, "sizes": {"a": 2.0, "n": "n + 1"}},
     "'n' is neither an input (x) nor a size declared before"),
    ({"inputs": ["x", "a"], "outputs": {"out": "x.shape"}, "sizes": {"a": 1, "n": "x.numel()"}},
     "inputs: 'a' of scale(out, x, a, n) is a scalar"),
    ({"inputs": ["x"], "outputs": {"x": "x.shape"}, "sizes": {"a": 1, "n": "x.numel()"}},
     "outputs: 'x' of scale(out, x, a, n) is a const pointer"),
    ({"inputs": ["x"], "outputs": {"out": "x.shape"}, "sizes": {"a": 1, "n": "x.numel()"},
      "extra": 1},
     "unknown key(s) ['extra']"),
    ({"inputs": ["x"], "outputs": {"out": "lambda x: x.shape"}, "sizes": {"a": 1, "n": "x.numel()"}},
     "Lambda is not part of the spec's expressions"),
])
def test_aot_refuses_bad_specs(tmp_path, spec, message):
    (tmp_path / "scale.cpp").write_text(SRC)
    (tmp_path / "scale.json").write_text(json.dumps(spec))
    p = aot("scale.cpp", "--fn", "scale", "-o", "out", cwd=tmp_path)
    assert p.returncode == 2 and message in p.stderr, p.stderr
    assert not (tmp_path / "out").exists()


def test_aot_spec_on_the_command_line(tmp_path):
    (tmp_path / "scale.cpp").write_text(SRC)
    p = aot("scale.cpp", "--fn", "scale", "-o", "out", "--inputs", "x", "--output",
            "out=[*x.shape[:-1], x.size(-1)]", "--size", "a=2.5", "--size", "n=x.numel()",
            "--check", "x.dim() >= 1", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    src = (tmp_path / "out" / "scale.cpp").read_text()
    assert "p.sizes.a = 2.5;" in src
    assert 'check failed: ", "x.dim() >= 1"' in src
    assert "scale(const at::Tensor& x);" in (tmp_path / "out" / "scale.h").read_text()


def test_aot_refuses_quoted_includes_and_missing_spec(tmp_path):
    (tmp_path / "k.cpp").write_text('#include "mine.h"\n' + SRC)
    (tmp_path / "mine.h").write_text("")
    p = aot("k.cpp", "--fn", "scale", "-o", "out", "--inputs", "x", "--output", "out=x.shape",
            "--size", "a=1.0", "--size", "n=x.numel()", cwd=tmp_path)
    assert p.returncode == 2 and '#include "mine.h": the op\'s source must be self-contained' \
        in p.stderr, p.stderr
    (tmp_path / "k.cpp").write_text(SRC)
    p = aot("k.cpp", "--fn", "scale", "-o", "out", cwd=tmp_path)
    assert p.returncode == 2 and "cannot read spec k.json" in p.stderr, p.stderr
    p = aot("k.cpp", "--fn", "nope", "-o", "out", "--inputs", "x", "--output", "out=x.shape",
            cwd=tmp_path)
    assert p.returncode == 2 and "nope" in p.stderr, p.stderr


def test_aot_from_python(tmp_path):
    import torchclad

    files = torchclad.aot(SRC, "scale", inputs=["x"], outputs={"out": "x.shape"},
                          sizes={"a": 0.5, "n": "x.numel()"}, checks=["x.dim() == 1"],
                          out_dir=tmp_path, op_name="scale_half")
    names = {p.relative_to(tmp_path).as_posix() for p in files}
    assert {"scale_half.h", "scale_half.cpp", "CMakeLists.txt", "torchclad/libtorch.h",
            "torchclad/libtorch.cpp", "torchclad/tape.h"} <= names
    src = (tmp_path / "scale_half.cpp").read_text()
    assert 'm.def("scale_half(Tensor x) -> Tensor");' in src
    assert "k::scale_reverse_sweep<TcScalar>(" in src and "p.sizes.a = 0.5;" in src
    assert "at::Tensor scale_half(const at::Tensor& x);" in (tmp_path / "scale_half.h").read_text()
    with pytest.raises(ValueError, match="outputs: 'y' is not a parameter"):
        torchclad.aot(SRC, "scale", inputs=["x"], outputs={"y": "x.shape"}, out_dir=tmp_path)


def test_extra_functions_go_into_the_kernel_namespace(tmp_path):
    """The hook for forward-mode functions: (name, text) pairs compiled with the op, in its
    kernel namespace beside the reverse-mode functions."""
    from torchclad.engine import differentiate
    from torchclad.toolchain.libtorch import write_op
    from torchclad.toolchain.libtorch_spec import Spec

    d = differentiate(SRC, "scale")
    extra = ("scale_darg0", "template <typename T>\nT scale_darg0(T a) { return a; }\n")
    spec = Spec.of({"inputs": ["x"], "outputs": {"out": "x.shape"},
                    "sizes": {"a": 2.0, "n": "x.numel()"}})
    write_op(d, spec, tmp_path, extra_functions=[extra])
    src = (tmp_path / "scale.cpp").read_text()
    k = src[src.index("namespace k {"):src.index("}  // namespace k")]
    assert "T scale_darg0(T a) { return a; }" in k and "scale_reverse_sweep(" in k


def test_gen_command_still_prints_the_derivative(tmp_path):
    """cli.py's two commands share the reading of FILE."""
    (tmp_path / "scale.cpp").write_text(SRC)
    p = subprocess.run([sys.executable, "-m", "torchclad", "gen", "scale.cpp", "--fn", "scale"],
                       cwd=tmp_path, env=env(), capture_output=True, text=True)
    assert p.returncode == 0 and "void scale_pullback(" in p.stdout, p.stderr
    p = subprocess.run([sys.executable, "-m", "torchclad", "gen", "nope.cpp", "--fn", "scale"],
                       cwd=tmp_path, env=env(), capture_output=True, text=True)
    assert p.returncode == 2 and "torchclad gen: cannot read nope.cpp" in p.stderr
