"""User kernels (issue #16): quick to build, cheap to call, fast to run, safe to get wrong.

The build (torchclad.toolchain.jit: plain C++, C entry points, both scalar types at once, a
cache hit that runs neither libclang nor the compiler, one build for function and gradient,
arguments checked before the compiler), the C++ eager path (torchclad._C_dispatch), the shape
contract, debug builds, differentiable scalar parameters and the compiler's first error.
Timings are printed, never asserted (benchmarks/bench_user_kernels.py measures them).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
import torch

import torchclad
from torchclad.bridge import fastpath
from torchclad.bridge import op as ops
from torchclad.bridge.guard import MemoryFault
from torchclad.toolchain import BuildError, jit, store

REPO = Path(__file__).resolve().parents[1]

SWIGLU = r"""
#include <cmath>
// N elements: out = a * sigmoid(a) * b
template <typename T>
void swiglu(T* out, const T* a, const T* b, int N) {
  for (int i = 0; i < N; i++) out[i] = a[i] / (T(1) + std::exp(-a[i])) * b[i];
}
"""

RMSNORM = r"""
#include <cmath>
// N rows of C channels, w has C entries
template <typename T>
void rmsnorm(T* out, const T* x, const T* w, int N, int C) {
  for (int n = 0; n < N; n++) {
    T ss = 0;
    for (int c = 0; c < C; c++) ss += x[n * C + c] * x[n * C + c];
    T r = T(1) / std::sqrt(ss / C + T(1e-5));
    for (int c = 0; c < C; c++) out[n * C + c] = x[n * C + c] * r * w[c];
  }
}
"""

SCALED = r"""
#include <cmath>
// out = alpha * tanh(beta * x), alpha and beta scalars
template <typename T>
void scaled_tanh(T* out, const T* x, T alpha, T beta, int N) {
  for (int i = 0; i < N; i++) out[i] = alpha * std::tanh(beta * x[i]);
}
"""


def _swiglu_ref(a, b):
    return a * torch.sigmoid(a) * b


@pytest.fixture(scope="module")
def swiglu():
    return torchclad.function(SWIGLU, "swiglu", inputs=["a", "b"], outputs={"out": ("N",)},
                              input_shapes={"a": ("N",), "b": ("N",)})


def _pair(n=16, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, dtype=dtype, generator=g).requires_grad_(),
            torch.randn(n, dtype=dtype, generator=g).requires_grad_())


def _entries(root: Path) -> list[Path]:
    return [p for p in root.iterdir() if p.name not in store.SUBDIRS] if root.exists() else []


# ---- values, gradients, both dtypes


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_swiglu_matches_torch(swiglu, dtype):
    a, b = _pair(dtype=dtype)
    y = swiglu(a, b)
    ra, rb = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    ref = _swiglu_ref(ra, rb)
    torch.testing.assert_close(y, ref)
    g = torch.randn_like(y)
    torch.testing.assert_close(torch.autograd.grad(y, (a, b), g),
                               torch.autograd.grad(ref, (ra, rb), g))


def test_swiglu_gradcheck_and_opcheck(swiglu):
    a, b = _pair(8)
    assert torch.autograd.gradcheck(swiglu, (a, b))
    torch.library.opcheck(swiglu, (a, b))


# ---- the build: one per recipe, shared, checked first, a cache hit without libclang


def test_function_and_gradient_share_one_build(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("TORCHCLAD_CACHE_DIR", str(tmp_path / "cache"))
    src = SWIGLU + f"// {uuid.uuid4().hex}\n"
    f = torchclad.function(src, "swiglu", inputs=["a", "b"], outputs={"out": ("N",)},
                           input_shapes={"a": ("N",), "b": ("N",)})
    g = torchclad.gradient(src, "swiglu", "a, b")
    assert capfd.readouterr().err.count("torchclad: compiling") == 1
    assert len(_entries(tmp_path / "cache")) == 1
    a, b = _pair(5)
    out = torch.zeros(5, dtype=torch.float64)
    da, db = g(out, a, b, 5, grad_outputs={"out": torch.ones(5, dtype=torch.float64)})
    ga, gb = torch.autograd.grad(f(a, b).sum(), (a, b))
    torch.testing.assert_close((da, db), (ga, gb))
    assert g.wrt == ("a", "b")
    assert "swiglu_pullback" in g.source and "_d_b" in g.source  # the derivative for wrt


def test_spec_errors_come_before_the_compiler(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("TORCHCLAD_CACHE_DIR", str(tmp_path / "cache"))
    src = RMSNORM + f"// {uuid.uuid4().hex}\n"
    with pytest.raises(ValueError, match="inputs: 'weight' is not a parameter of rmsnorm"):
        torchclad.function(src, "rmsnorm", inputs=["x", "weight"], outputs={"out": ("N", "C")},
                           input_shapes={"x": ("N", "C"), "weight": ("C",)})
    with pytest.raises(ValueError, match="input_shapes: 'w' is not in inputs"):
        torchclad.function(src, "rmsnorm", inputs=["x"], outputs={"out": ("N", "C")},
                           input_shapes={"x": ("N", "C"), "w": ("C",)})
    with pytest.raises(TypeError, match="outputs\\['out'\\] must be a function"):
        torchclad.function(src, "rmsnorm", inputs=["x", "w"], outputs={"out": 3})
    assert "compiling" not in capfd.readouterr().err
    assert _entries(tmp_path / "cache") == []


def test_cache_hit_in_a_new_process_skips_libclang_and_the_compiler(swiglu, capfd):
    code = textwrap.dedent(f"""
        import json, sys, time
        import torch, torchclad
        t0 = time.perf_counter()
        op = torchclad.function({SWIGLU!r}, "swiglu", inputs=["a", "b"], outputs={{"out": ("N",)}},
                                input_shapes={{"a": ("N",), "b": ("N",)}})
        t1 = time.perf_counter()
        a = torch.randn(4, dtype=torch.float64)
        assert torch.allclose(op(a, a), a * torch.sigmoid(a) * a)
        print(json.dumps({{"ms": (t1 - t0) * 1e3, "clang": "clang.cindex" in sys.modules,
                          "engine": "torchclad.engine.driver" in sys.modules}}))
    """)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "compiling" not in r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert not res["clang"] and not res["engine"]
    with capfd.disabled():
        print(f"\n[user kernels] cache hit in a new process: torchclad.function -> op in "
              f"{res['ms']:.1f} ms")


def test_key_follows_source_options_and_compiler(monkeypatch):
    base = jit.Recipe(SWIGLU, "swiglu")
    key = jit.key_of(base)
    assert jit.key_of(jit.Recipe(SWIGLU, "swiglu")) == key
    for other in (jit.Recipe(SWIGLU + " ", "swiglu"), jit.Recipe(SWIGLU, "swiglu", debug=True),
                  jit.Recipe(SWIGLU, "swiglu", extra_cflags=("-O2",)),
                  jit.Recipe(SWIGLU, "swiglu", filename="other.cpp")):
        assert jit.key_of(other) != key
    monkeypatch.setenv("CXX", "g++ -Wall")
    assert jit.key_of(base) != key


def test_tampered_library_is_rebuilt(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("TORCHCLAD_CACHE_DIR", str(tmp_path / "cache"))
    src = SWIGLU + f"// {uuid.uuid4().hex}\n"
    recipe = jit.Recipe(src, "swiglu")
    torchclad.gradient(src, "swiglu")
    (entry,) = _entries(tmp_path / "cache")
    so = entry / "kernel_f32.so"
    data = so.read_bytes()
    part = so.with_name("part")
    part.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    os.replace(part, so)
    assert store.read_manifest(entry, entry.name) is None
    jit_built = jit.lookup  # a new process would look it up: not valid, so rebuilt on use
    monkeypatch.setattr(jit, "_built", {})
    assert jit_built(recipe) is None
    capfd.readouterr()
    torchclad.gradient(src, "swiglu")
    assert "compiling" in capfd.readouterr().err
    assert store.read_manifest(entry, entry.name) is not None


def _build_in_child(src, cache, q):
    import contextlib
    import io

    os.environ["TORCHCLAD_CACHE_DIR"] = cache
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            g = torchclad.gradient(src, "swiglu", "a")
            (da,) = g(torch.zeros(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64),
                      torch.ones(2, dtype=torch.float64), 2,
                      grad_outputs={"out": torch.ones(2, dtype=torch.float64)})
        q.put(("compiling" in err.getvalue(), float(da[0]), None))
    except BaseException as e:  # report, do not hang the parent
        q.put((False, None, f"{type(e).__name__}: {e}"))


def test_processes_building_one_kernel_at_once_compile_it_once(tmp_path):
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    src = SWIGLU + f"// {uuid.uuid4().hex}\n"
    procs = [ctx.Process(target=_build_in_child, args=(src, str(tmp_path / "cache"), q))
             for _ in range(3)]
    for p in procs:
        p.start()
    results = [q.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert all(err is None for _, _, err in results), results
    assert sum(compiled for compiled, _, _ in results) == 1  # the others waited on the lock
    s = 1 / (1 + math.exp(-1.0))
    assert all(da == pytest.approx(s + s * (1 - s)) for _, da, _ in results)
    assert len(_entries(tmp_path / "cache")) == 1


# ---- the shape contract


def test_contract_checks_shapes_and_gives_sizes():
    f = torchclad.function(RMSNORM, "rmsnorm", inputs=["x", "w"], outputs={"out": ("N", "C")},
                           input_shapes={"x": ("N", "C"), "w": ("C",)})
    x = torch.randn(4, 8, dtype=torch.float64, requires_grad=True)
    w = torch.randn(8, dtype=torch.float64, requires_grad=True)
    ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w
    torch.testing.assert_close(f(x, w), ref)
    assert torch.autograd.gradcheck(f, (x, w))
    with pytest.raises(ValueError, match=r"input 'w' has shape \(4,\), expected \(C,\) with "
                                         r"C = 8 \(from input 'x' of shape \(4, 8\)\)"):
        f(x, torch.ones(4, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"input 'x' must have 2 dimension\(s\) \(N, C\)"):
        f(x.reshape(-1), w)
    with pytest.raises(Exception, match="input 'w' has shape"):  # traced calls check it too
        torch.compile(f, fullgraph=True)(x, torch.ones(3, dtype=torch.float64))
    torch.library.opcheck(f, (x, w))


def test_contract_symbol_without_a_value_is_an_error():
    with pytest.raises(ValueError, match="output dims \\(N, K\\) name \\['K'\\]"):
        torchclad.function(RMSNORM, "rmsnorm", inputs=["x", "w"], outputs={"out": ("N", "K")},
                           input_shapes={"x": ("N", "C"), "w": ("C",)})


# ---- differentiable scalar parameters


@pytest.fixture(scope="module")
def scaled_tanh():
    return torchclad.function(SCALED, "scaled_tanh", inputs=["x", "alpha", "beta"],
                              outputs={"out": ("N",)}, input_shapes={"x": ("N",)})


def test_scalar_parameters_get_gradients(scaled_tanh):
    x = torch.randn(6, dtype=torch.float64, requires_grad=True)
    alpha = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    beta = torch.tensor(-0.7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(scaled_tanh, (x, alpha, beta))
    (ga, gb) = torch.autograd.grad(scaled_tanh(x, alpha, beta).sum(), (alpha, beta))
    assert ga.shape == () and gb.shape == ()
    torch.testing.assert_close(ga, torch.tanh(beta * x).sum())
    x32, a32, b32 = (t.detach().float().requires_grad_() for t in (x, alpha, beta))
    ref = a32 * torch.tanh(b32 * x32)
    torch.testing.assert_close(scaled_tanh(x32, a32, b32), ref)
    torch.testing.assert_close(torch.autograd.grad(scaled_tanh(x32, a32, b32).sum(), (a32, b32)),
                               torch.autograd.grad(ref.sum(), (a32, b32)))
    torch.library.opcheck(scaled_tanh, (x, alpha, beta))


def test_scalar_parameter_must_be_0dim(scaled_tanh):
    x = torch.randn(3, dtype=torch.float64)
    with pytest.raises(ValueError, match="input 'alpha' is the scalar parameter T alpha: pass a "
                                         "0-dim tensor"):
        scaled_tanh(x, torch.ones(3, dtype=torch.float64), torch.tensor(1.0, dtype=torch.float64))
    with pytest.raises(ValueError, match="'N' .* is a scalar int"):
        torchclad.function(SCALED, "scaled_tanh", inputs=["x", "alpha", "beta", "N"],
                           outputs={"out": ("N",)}, input_shapes={"x": ("N",)})


# ---- debug builds: an out-of-bounds access is an exception naming the array


def test_debug_build_names_the_array_and_line_of_an_out_of_bounds_read():
    f = torchclad.function(RMSNORM, "rmsnorm", inputs=["x", "w"],
                           outputs={"out": lambda x, w: x.shape},
                           sizes={"N": lambda x, w: x.shape[0], "C": lambda x, w: x.shape[1]},
                           debug=True)
    x = torch.randn(4, 8, dtype=torch.float64, requires_grad=True)
    w = torch.randn(8, dtype=torch.float64, requires_grad=True)
    f(x, w).sum().backward()  # a correct call works, gradients included
    torch.testing.assert_close(x.grad.shape, x.shape)
    with pytest.raises(MemoryFault, match=r"out-of-bounds read past the end of 'w' \(4 float32 "
                                          r"elements\): element 4, in the forward at kernel\.cpp:10"):
        f(torch.randn(4, 8), torch.ones(4))


def test_debug_build_turns_an_out_of_bounds_write_into_an_exception():
    src = r"""
void shift(double* out, const double* x, int n) {
  for (int i = 0; i < n; i++) out[i + 1] = x[i];
}
"""
    f = torchclad.function(src, "shift", inputs=["x"], outputs={"out": lambda x: x.shape},
                           sizes={"n": lambda x: x.numel()}, debug=True)
    with pytest.raises(MemoryFault, match=r"out-of-bounds write past the end of 'out' \(7 "
                                          r"float64 elements\): element 7, .* at kernel\.cpp:3"):
        f(torch.randn(7, dtype=torch.float64))
    g = torchclad.gradient(src, "shift", "x", debug=True)
    with pytest.raises(MemoryFault, match="past the end of 'out'"):
        g(torch.zeros(7, dtype=torch.float64), torch.randn(7, dtype=torch.float64), 7)
    assert torch.equal(f(torch.zeros(0, dtype=torch.float64)), torch.zeros(0, dtype=torch.float64))


def test_debug_build_traps_an_out_of_bounds_local_array():
    src = textwrap.dedent("""\
        void local_oob(double* out, const double* x, int n, int k) {
          double buf[4];
          for (int i = 0; i < 4; i++) buf[i] = x[i];
          for (int i = 0; i < n; i++) out[i] = buf[k] * x[i];
        }
        """)
    f = torchclad.function(src, "local_oob", inputs=["x"], outputs={"out": lambda x: x.shape},
                           sizes={"n": lambda x: x.numel(), "k": lambda x: 7}, debug=True)
    with pytest.raises(MemoryFault, match=r"sanitizer trap .* at kernel\.cpp:4: the debug build "
                                          r"traps on an out-of-bounds index into a local array"):
        f(torch.randn(5, dtype=torch.float64))


# ---- compiler errors: the user's file and line, the first error only


def test_compile_error_is_the_first_one_at_the_users_line():
    src = textwrap.dedent("""\
        #include <cmath>
        template <typename T>
        void g(T* out, const T* x, int n) {
          for (int i = 0; i < n; i++) {
            const double* p = x;
            out[i] = p[i] * 2;
          }
        }
        """)
    with pytest.raises(BuildError) as info:
        torchclad.function(src, "g", inputs=["x"], outputs={"out": lambda x: x.shape},
                           sizes={"n": lambda x: x.numel()}, filename="mykernel.cpp")
    msg = str(info.value)
    assert msg.startswith("mykernel.cpp:5:")
    assert "(with T = float; the double build compiled)" in msg
    assert "const double* p = x;" in msg  # the line, with a caret under it
    assert "torchclad-generated" not in msg and len(msg) < 400
    assert Path(info.value.log).is_file()  # the whole log is kept


def test_std_vector_gets_a_clear_message():
    src = "#include <vector>\ndouble f(const std::vector<double>& x) { return x[0]; }\n"
    with pytest.raises(ValueError, match="kernel.cpp:2:37: parameter 'x' is a "
                                         "std::vector<double>: std containers are not supported"):
        torchclad.gradient(src, "f")


def test_cxx_with_flags_is_split_into_words(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHCLAD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CXX", "g++ -DTORCHCLAD_TEST_CXX_FLAG=1")
    from torchclad.engine.frontend import parse

    assert parse.system_include_dirs()  # the include probe ran g++ with its flag
    g = torchclad.gradient(SWIGLU, "swiglu", "a")
    a, b = _pair(3)
    (da,) = g(torch.zeros(3, dtype=torch.float64), a, b, 3,
              grad_outputs={"out": torch.ones(3, dtype=torch.float64)})
    (ref,) = torch.autograd.grad(_swiglu_ref(a, b).sum(), (a,))
    torch.testing.assert_close(da, ref)


def test_extra_cflags_reach_the_engine_and_the_compiler():
    src = "double scaled(double x) { return SCALE * x * x; }\n"
    g = torchclad.gradient(src, "scaled", extra_cflags="-DSCALE=3 -O2")
    (dx,) = g(2.0)
    assert dx == pytest.approx(12.0)


# ---- the C++ eager path


def test_eager_path_is_in_cpp_and_runs_one_forward_and_one_sweep(swiglu):
    kop = ops.kernel_op(swiglu)
    assert kop.fast is not None, "torchclad._C_dispatch is not built (make install builds it)"
    before = kop.fast.stats()
    a, b = _pair()
    y = swiglu(a, b)
    assert type(y.grad_fn).__name__ == "CppFunction"
    y.sum().backward()
    after = kop.fast.stats()
    assert after["recording_forward"] - before["recording_forward"] == 1
    assert after["reverse_sweep"] - before["reverse_sweep"] == 1
    with torch.no_grad():
        swiglu(a, b)
    assert kop.fast.stats()["forward"] - after["forward"] == 1


def test_eager_path_frees_the_tape_when_backward_never_runs(swiglu):
    assert ops.kernel_op(swiglu).fast is not None, "torchclad._C_dispatch is not built"
    base = fastpath.live_tapes()
    a, b = _pair()
    y = swiglu(a, b)
    assert fastpath.live_tapes() == base + 1
    z = (y * 2).sum()
    del y
    assert fastpath.live_tapes() == base + 1  # the graph holds it
    del z
    assert fastpath.live_tapes() == base


def test_eager_path_twice_backward_and_create_graph(swiglu):
    a, b = _pair()
    y = swiglu(a, b)
    g1 = torch.autograd.grad(y.sum(), (a, b), retain_graph=True)
    g2 = torch.autograd.grad(y.sum(), (a, b))
    torch.testing.assert_close(g1, g2, rtol=0, atol=0)
    # create_graph takes the Python path, whose backward is differentiable (the generated
    # double backward): same second derivatives as the math in torch ops
    (ga,) = torch.autograd.grad(swiglu(a, b).sum(), (a,), create_graph=True)
    got = torch.autograd.grad(ga.sum(), (a, b))
    (ra,) = torch.autograd.grad((a * torch.sigmoid(a) * b).sum(), (a,), create_graph=True)
    torch.testing.assert_close(got, torch.autograd.grad(ra.sum(), (a, b)))


def test_eager_path_leaves_forward_mode_to_the_python_path(swiglu):
    kop = ops.kernel_op(swiglu)
    assert kop.fast is not None, "torchclad._C_dispatch is not built (make install builds it)"
    import torch.autograd.forward_ad as fwAD

    a, b = _pair()
    before = kop.fast.stats()
    with fwAD.dual_level():
        dual = fwAD.make_dual(a.detach(), torch.ones_like(a))
        tangent = fwAD.unpack_dual(swiglu(dual, b.detach())).tangent
    assert kop.fast.stats() == before  # the C++ path declined: it would drop the tangent
    x, y = a.detach(), b.detach()
    s = torch.sigmoid(x)
    torch.testing.assert_close(tangent, y * (s + x * s * (1 - s)))  # the generated jvp


def test_eager_path_wrong_dtype_gets_the_python_message(swiglu):
    a, b = _pair()
    with pytest.raises(TypeError, match="input 'b' is float32 but 'a' is float64"):
        swiglu(a, b.detach().float())
