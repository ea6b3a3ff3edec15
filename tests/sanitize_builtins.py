"""The built-in kernels' generated derivatives (torchclad/_generated/) under ASan + UBSan.

Building ``torchclad._C`` itself with sanitizers costs minutes (pybind11 under ASan). Instead each
generated unit ``<unit>.cpp`` (kernel source + the derivative code the engine wrote for it) is
compiled with ``corpus_harness.SANITIZE_FLAGS`` together with a plain ``extern "C"`` wrapper per
binding, and a ctypes-backed stand-in of ``torchclad._C`` (same binding names, same calling
convention: addresses as ints, scalars as numbers, a ``Tape``) is installed as ``torchclad._C``
before ``torchclad.nn`` is imported. The modules then run through the real bridge
(torchclad/bridge/op.py: split forward, reverse sweep, recomputed records) on sanitized code.

``build(out_dir)`` runs in the test process (g++ without the sanitizer runtime preloaded);
``python tests/sanitize_builtins.py OUT_DIR`` runs in a process started with
``corpus_harness.sanitizer_env()``: it exercises every module forward + backward, float32 and
float64, ordinary, odd and zero sizes, against torch, and prints ``OK <n> checks``. A sanitizer
report aborts the process (abort_on_error=1) with the report on stderr. ``OUT_DIR --plant`` runs
a generated pullback past the end of its arrays instead (the self-test: it must be reported).
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))
import corpus_harness as H  # noqa: E402

_CTYPES = {
    "int": ctypes.c_int, "unsigned": ctypes.c_uint, "unsigned int": ctypes.c_uint,
    "long": ctypes.c_long, "long long": ctypes.c_longlong, "unsigned long": ctypes.c_ulong,
    "size_t": ctypes.c_size_t, "std::size_t": ctypes.c_size_t, "int64_t": ctypes.c_int64,
    "int32_t": ctypes.c_int32, "bool": ctypes.c_bool, "float": ctypes.c_float,
    "double": ctypes.c_double,
}
_SUFFIX = {"float": "f32", "double": "f64"}
_EXPORT = '#define TCS_EXPORT extern "C" __attribute__((visibility("default")))\n'


def _scalars(s) -> tuple[str, ...]:
    from torchclad.toolchain.glue import scalar_types

    return scalar_types(s)


def _void(s) -> bool:
    r = s.return_type
    return r is None or (r.base == "void" and not r.pointer)


def _kinds(s):
    """(kind, has seed, has adjoints, has tape) of every binding of ``s``."""
    yield "", False, False, False
    yield "pullback", not _void(s), True, False
    if not _void(s):
        yield "grad", False, True, False
    yield "reverse_forw", False, False, True
    yield "reverse_sweep", not _void(s), True, True


def _binding(s, scalar: str, kind: str) -> str:
    return f"{s.name}_{kind}_{_SUFFIX[scalar]}" if kind else f"{s.name}_{_SUFFIX[scalar]}"


def wrapper(sigs) -> str:
    """extern "C" wrappers of every binding of ``sigs`` (one unit), plus the tape's."""
    out = [_EXPORT,
           "TCS_EXPORT void* tcs_tape_new() { return new torchclad::Tape(); }\n",
           "TCS_EXPORT void tcs_tape_delete(void* t) { delete (torchclad::Tape*)t; }\n",
           "TCS_EXPORT int tcs_tape_empty(void* t) { return ((torchclad::Tape*)t)->empty(); }\n",
           "TCS_EXPORT unsigned long tcs_tape_size_bytes(void* t) { "
           "return (unsigned long)((torchclad::Tape*)t)->size_bytes(); }\n"]
    for s in sigs:
        by = {p.name: p for p in s.params}
        for scalar in _scalars(s):
            targs = f"<{', '.join(scalar for _ in s.template_params)}>" if s.template_params else ""
            ret = "void" if _void(s) else s.return_type.c_type(scalar)
            for kind, seed, adj, tape in _kinds(s):
                decl, use = [], []
                for i, p in enumerate(s.params):
                    if p.pointer:
                        decl.append(f"void* a{i}")
                        use.append(f"({p.c_type(scalar)})a{i}")
                    else:
                        decl.append(f"{p.c_type(scalar)} a{i}")
                        use.append(f"a{i}")
                if seed:
                    decl.append(f"{s.return_type.c_type(scalar)} dy")
                    use.append("dy")
                if adj:
                    for j, w in enumerate(s.adjoints):
                        p = by[w]
                        base = scalar if p.base in s.template_params else p.base
                        decl.append(f"void* d{j}")
                        use.append(f"({base}*)d{j}")
                if tape:
                    decl.append("void* tape")
                    use.append("*(torchclad::Tape*)tape")
                fn = f"{s.name}_{kind}" if kind else s.name
                r = "void" if kind in ("pullback", "grad", "reverse_sweep") else ret
                call = f"{fn}{targs}({', '.join(use)})"
                body = f"{call};" if r == "void" else f"return {call};"
                out.append(f"TCS_EXPORT {r} tcs_{_binding(s, scalar, kind)}({', '.join(decl)}) "
                           f"{{ {body} }}\n")
    return "".join(out)


def _units(sigs: dict) -> dict[str, list]:
    units: dict[str, list] = {}
    for s in sigs.values():
        units.setdefault(s.unit, []).append(s)
    return units


def build(out_dir: Path, jobs: int = 2) -> dict:
    """Compile every unit of ``torchclad._C``'s signatures with SANITIZE_FLAGS into ``out_dir``.

    Writes ``signatures.json`` beside the libraries; returns {"seconds": compile time}."""
    import time

    from torchclad import _C
    from torchclad.builtin import registry as kernels
    from torchclad.toolchain import compiler as cc
    from torchclad.toolchain import generated_dir
    from torchclad.toolchain.signature import dumps

    sigs = _C.__torchclad_signatures__
    units = _units(sigs)
    gen = generated_dir()
    data = json.loads(dumps(units.items()))
    for name, sig in sigs.items():  # what the build recorded, not re-derived (it has no code here)
        for field in ("restores",):
            if hasattr(sig, field):
                data[name][field] = getattr(sig, field)
    (out_dir / "signatures.json").write_text(json.dumps(data))
    link: list[str] = []
    for name in sorted({n for k in kernels.KERNELS for n in k.libraries}):
        d, lib = cc.external_library(name)
        link += [f"-L{d}", f"-l{lib}", f"-Wl,-rpath,{d}"]
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    t0 = time.perf_counter()
    running: list[tuple[str, subprocess.Popen]] = []
    failures = []

    def reap(item):
        unit, proc = item
        _, err = proc.communicate()
        if proc.returncode != 0:
            failures.append(f"{unit}: g++ failed:\n{err[-4000:]}")

    for unit, group in units.items():
        src = out_dir / f"{unit}.cpp"
        text = (gen / f"{unit}.cpp").read_text()
        src.write_text(text + "\n" + wrapper(group))
        argv = [*cc.compiler(), "-std=c++17", "-shared", "-fPIC", H.SANITIZE_OPT, "-fno-fast-math",
                "-fopenmp", "-fvisibility=hidden", *H.SANITIZE_FLAGS, f"-I{cc.runtime_include_dir()}",
                f"-I{gen}", str(src), "-o", str(out_dir / f"{unit}.so"), *link, "-lgomp"]
        running.append((unit, subprocess.Popen(argv, cwd=out_dir, env=env, stdout=subprocess.PIPE,
                                               stderr=subprocess.PIPE, text=True)))
        while len(running) >= jobs:
            reap(running.pop(0))
    for item in running:
        reap(item)
    if failures:
        raise RuntimeError("\n".join(failures))
    return {"seconds": time.perf_counter() - t0}


# ---- the stand-in of torchclad._C (runs in the sanitized process) ------------------------------------

class _Shim:
    """Module-like: the bindings of torchclad._C, backed by the sanitized libraries."""

    def __init__(self, out_dir: Path):
        from torchclad.toolchain.signature import loads

        sigs = loads((out_dir / "signatures.json").read_text())
        self.__torchclad_signatures__ = sigs
        self.__name__ = "torchclad._C (sanitized stand-in)"
        self.__torchclad_kernels__ = sorted(sigs)
        libs = {u: ctypes.CDLL(str(out_dir / f"{u}.so")) for u in _units(sigs)}
        first = next(iter(libs.values()))
        new, delete = first.tcs_tape_new, first.tcs_tape_delete
        new.restype, new.argtypes = ctypes.c_void_p, []
        delete.restype, delete.argtypes = None, [ctypes.c_void_p]
        empty, size = first.tcs_tape_empty, first.tcs_tape_size_bytes
        empty.restype, empty.argtypes = ctypes.c_int, [ctypes.c_void_p]
        size.restype, size.argtypes = ctypes.c_ulong, [ctypes.c_void_p]

        class Tape:
            def __init__(self):
                self.ptr = new()

            def __del__(self):
                delete(self.ptr)

            def empty(self):
                return bool(empty(self.ptr))

            def size_bytes(self):
                return int(size(self.ptr))

        self.Tape = Tape
        for s in sigs.values():
            lib = libs[s.unit]
            for scalar in _scalars(s):
                for kind, seed, adj, tape in _kinds(s):
                    setattr(self, _binding(s, scalar, kind), self._fn(lib, s, scalar, kind, seed, adj, tape))

    @staticmethod
    def _fn(lib, s, scalar, kind, seed, adj, tape):
        def ctype(p):
            return _CTYPES[scalar if p.base in s.template_params else p.base]

        argtypes = [ctypes.c_void_p if p.pointer else ctype(p) for p in s.params]
        if seed:
            argtypes.append(ctype(s.return_type))
        if adj:
            argtypes += [ctypes.c_void_p] * len(s.adjoints)
        if tape:
            argtypes.append(ctypes.c_void_p)
        f = getattr(lib, f"tcs_{_binding(s, scalar, kind)}")
        f.argtypes = argtypes
        returns = kind in ("", "reverse_forw") and not _void(s)
        f.restype = ctype(s.return_type) if returns else None

        def call(*args):
            if len(args) != len(argtypes):
                raise TypeError(f"{_binding(s, scalar, kind)}: {len(args)} arguments for {len(argtypes)}")
            return f(*[a.ptr if hasattr(a, "ptr") else a for a in args])

        return call


def install(out_dir: Path) -> None:
    """Make the sanitized stand-in ``torchclad._C`` (before torchclad.nn is imported)."""
    import torchclad

    assert "torchclad.nn" not in sys.modules, "install() must run before torchclad.nn is imported"
    shim = _Shim(out_dir)
    sys.modules["torchclad._C"] = shim
    torchclad._C = shim
    for variant in ("avx2", "avx512"):  # CPU-specific builds of the real _C: never these here
        sys.modules[f"torchclad._C_{variant}"] = None


# ---- what runs on it ---------------------------------------------------------------------------------

def exercise() -> int:
    """Every module, forward + backward, against torch; returns the number of checks."""
    from types import SimpleNamespace

    import torch

    import torchclad.nn as tnn
    from torchclad.builtin import loader
    from torchclad.testing import ReferenceGPT2

    assert isinstance(loader.extension(), _Shim), "the built-in ops do not use the sanitized kernels"
    torch.manual_seed(0)
    checks = 0

    def same(ours, ref, inputs, dtype, *, call=lambda m, *a: m(*a)):
        nonlocal checks
        tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-9, atol=1e-10)
        xs = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
        rs = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
        y, r = call(ours, *xs), call(ref, *rs)
        torch.testing.assert_close(y, r, **tol, equal_nan=True)
        g = torch.randn_like(r)
        (y * g).sum().backward()
        (r * g).sum().backward()
        for a, b in zip(xs, rs):
            if a.is_floating_point():
                torch.testing.assert_close(a.grad, b.grad, **tol)
        theirs = dict(ref.named_parameters())
        for n, p in ours.named_parameters():
            torch.testing.assert_close(p.grad, theirs[n].grad, **tol, msg=lambda m: f"{n}: {m}")
        checks += 1

    cfg = SimpleNamespace(n_embd=12, n_head=3, block_size=9, bias=True, dropout=0.0)
    for dtype in (torch.float32, torch.float64):
        for lead in ((3,), (2, 5), (0,), (1,)):
            lin = tnn.Linear(7, 5).to(dtype)
            ref = torch.nn.Linear(7, 5).to(dtype)
            ref.load_state_dict(lin.state_dict())
            same(lin, ref, [torch.randn(*lead, 7, dtype=dtype)], dtype)
            ln = tnn.LayerNorm(7).to(dtype)
            ref = torch.nn.LayerNorm(7).to(dtype)
            with torch.no_grad():
                ln.weight.normal_(), ln.bias.normal_()
            ref.load_state_dict(ln.state_dict())
            same(ln, ref, [torch.randn(*lead, 7, dtype=dtype)], dtype)
            for approximate in ("tanh", "none"):
                same(tnn.GELU(approximate), torch.nn.GELU(approximate),
                     [torch.randn(*lead, 7, dtype=dtype)], dtype)
            same(tnn.Softmax(-1), torch.nn.Softmax(-1), [torch.randn(*lead, 7, dtype=dtype) * 30], dtype)
            emb = tnn.Embedding(11, 6).to(dtype)
            ref = torch.nn.Embedding(11, 6).to(dtype)
            ref.load_state_dict(emb.state_dict())
            same(emb, ref, [torch.randint(0, 11, lead)], dtype)
            n = lead[0]
            tgt = torch.randint(0, 9, (n,))
            if n > 1:
                tgt[0] = -100
            for reduction in ("sum", "none"):
                same(tnn.CrossEntropyLoss(reduction=reduction),
                     torch.nn.CrossEntropyLoss(reduction=reduction),
                     [torch.randn(n, 9, dtype=dtype) * 5, tgt], dtype)
        for T in (1, 5, 9):
            att = tnn.CausalSelfAttention(cfg).to(dtype)
            x = torch.randn(2, T, 12, dtype=dtype)
            # reference: the same projections around torch's attention
            ref = _TorchAttention(att)
            same(att, ref, [x], dtype)
            mlp = tnn.MLP(cfg).to(dtype)
            same(mlp, _TorchMLP(mlp), [x], dtype)
        # GPT-2, modular and fused (the gpt2 unit), with ignored targets
        config = tnn.GPT2Config(block_size=8, vocab_size=11, n_layer=2, n_head=2, n_embd=8)
        for fused in (False, True):
            torch.manual_seed(1)
            model = tnn.GPT2(config, fused=fused).to(dtype)
            ref = ReferenceGPT2(config).to(dtype)
            ref.load_state_dict(model.state_dict())
            idx = torch.randint(0, 11, (2, 7))
            tgt = torch.randint(0, 11, (2, 7))
            tgt[0, 3] = -1
            same(model, ref, [idx, tgt], dtype, call=lambda m, i, t: m(i, t)[1])
        # a second backward through one graph recomputes the record from the saved inputs
        x = torch.randn(4, 7, dtype=dtype, requires_grad=True)
        y = tnn.LayerNorm(7).to(dtype)(x)
        y.sum().backward(retain_graph=True)
        g1 = x.grad.clone()
        y.sum().backward()
        torch.testing.assert_close(x.grad, 2 * g1)
        with torch.no_grad():  # no record: the plain forward
            tnn.GELU("tanh")(x)
        checks += 1
    return checks


class _TorchAttention(__import__("torch").nn.Module):
    """torch's attention around the projections of a torchclad CausalSelfAttention (copied)."""

    def __init__(self, att):
        import copy

        import torch

        super().__init__()
        self.nh = att.n_head
        self.c_attn = torch.nn.Linear(att.n_embd, 3 * att.n_embd).to(att.c_attn.weight.dtype)
        self.c_proj = torch.nn.Linear(att.n_embd, att.n_embd).to(att.c_attn.weight.dtype)
        self.c_attn.load_state_dict(copy.deepcopy(att.c_attn.state_dict()))
        self.c_proj.load_state_dict(copy.deepcopy(att.c_proj.state_dict()))

    def forward(self, x):
        import torch

        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.nh, C // self.nh).transpose(1, 2) for t in (q, k, v))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))


class _TorchMLP(__import__("torch").nn.Module):
    def __init__(self, mlp):
        import torch

        super().__init__()
        dt = mlp.c_fc.weight.dtype
        self.c_fc = torch.nn.Linear(mlp.c_fc.in_features, mlp.c_fc.out_features).to(dt)
        self.c_proj = torch.nn.Linear(mlp.c_proj.in_features, mlp.c_proj.out_features).to(dt)
        self.c_fc.load_state_dict(mlp.c_fc.state_dict())
        self.c_proj.load_state_dict(mlp.c_proj.state_dict())

    def forward(self, x):
        import torch

        return self.c_proj(torch.nn.functional.gelu(self.c_fc(x), approximate="tanh"))


def main(argv: list[str]) -> int:
    if not H.asan_loaded():
        print("sanitize_builtins: run me with corpus_harness.sanitizer_env() (libasan preloaded)",
              file=sys.stderr)
        return 2
    sys.path.insert(0, str(H.REPO))
    install(Path(argv[0]))
    if argv[1:] == ["--plant"]:
        plant()
        print("planted bug not reported")
        return 1
    print(f"OK {exercise()} checks")
    return 0


def plant() -> None:
    """The self-test: a generated pullback told that its arrays are one element longer than they
    are must be reported (heap-buffer-overflow in gelu_forward_pullback<float>)."""
    import torch

    import torchclad

    n = 16
    out, inp, d_inp, d_out = (torch.zeros(n) for _ in range(4))
    torchclad._C.gelu_forward_pullback_f32(out.data_ptr(), inp.data_ptr(), n + 1,
                                           d_inp.data_ptr(), d_out.data_ptr())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
