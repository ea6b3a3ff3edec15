"""Run the AD corpus (tests/corpus): differentiate a kernel, compile it with a C wrapper, check it.

For one case and one variant (g++ -O level × engine analyses on/off × combined `f_pullback` or split
`f_reverse_forw` + `f_reverse_sweep`), the harness

  1. calls `torchclad.engine.differentiate` and checks the reported params / wrt against the kernel's
     own signature (read here with libclang, independently of the engine);
  2. appends an extern "C" wrapper to `Derivative.translation_unit()` that calls the primal, the
     pullback and the split pair on raw buffers, and compiles it with
     `g++ -std=c++17 -shared -fPIC -O{0,2} -Wall -I csrc/runtime` — one build per case × opt ×
     analyses holding both paths, cached in a temporary directory for the session, and up to 64
     cases' builds compiled together (each in a namespace of its own) to keep g++ runs few;
  3. runs it in a forked child (a crash or a hang of generated code fails one test, not the session)
     on float64 buffers (float32 where the kernel is float), with the output adjoints seeded and the
     other adjoints zeroed, then again with those pre-filled with a constant c, and checks:
     inputs are not modified, adjoints accumulate (c + grad), the split forward returns and writes
     what the primal does and leaves nothing on the tape;
  4. compares the gradient with central finite differences of the primal in float64 — the primal is
     compiled on its own, from the kernel source alone — or with the case's exact expected gradient.

`python tests/corpus_harness.py [--reference | --sanitize] [--failures-md PATH] [case ...]` runs cases outside
pytest and prints the symptoms of every failing variant (--reference: only the corpus's self-check;
--sanitize: every case built with ASan + UBSan, both paths run, sanitizer reports printed — see
"sanitizers" below).
"""

from __future__ import annotations

import atexit
import ctypes
import importlib.util
import os
import pickle
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
CORPUS = TESTS / "corpus"
KERNELS = CORPUS / "kernels"
RUNTIME_INCLUDE = REPO / "csrc" / "runtime"

CXX = os.environ.get("CXX", "g++")
OPT_LEVELS = ("-O0", "-O2")
PATHS = ("pullback", "split")
ACCUMULATE_FILL = 0.5       # adjoint pre-fill for the accumulation check
CHILD_TIMEOUT = 60.0        # seconds for one forked run


def _load_cases():
    spec = importlib.util.spec_from_file_location("torchclad_corpus_cases", CORPUS / "cases.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


cases_module = _load_cases()
Case = cases_module.Case
CASES: list = cases_module.CASES
CASES_BY_NAME: dict = cases_module.CASES_BY_NAME


# ---- failures ---------------------------------------------------------------------------------------

class CorpusFailure(AssertionError):
    """A check failed. `kind` sorts the symptom: diff-error, interface, compile-error, crash,
    timeout, modified-input, accumulation, tape, forward-mismatch, wrong-gradient, variants-differ,
    bad-case (the corpus itself is wrong)."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"[{kind}] {message}")
        self.kind = kind
        self.message = message

    def __reduce__(self):
        return (CorpusFailure, (self.kind, self.message))


# ---- the kernel's signature, read with libclang -------------------------------------------------------

_DTYPES = {
    "double": np.float64, "float": np.float32, "long double": np.longdouble,
    "int": np.int32, "long": np.int64, "long long": np.int64,
    "unsigned int": np.uint32, "unsigned long": np.uint64, "unsigned long long": np.uint64,
    "short": np.int16, "unsigned short": np.uint16, "bool": np.bool_,
    "char": np.int8, "signed char": np.int8, "unsigned char": np.uint8,
}
FLOATING = ("double", "float")


@dataclass(frozen=True)
class Param:
    name: str
    base: str          # canonical scalar spelling, or the template parameter's name
    pointer: bool
    const: bool        # const scalar, or pointer to const
    reference: bool = False   # a scalar passed by reference (its buffer is the object)
    enum: str = ""            # an enum parameter's type (its value is passed as an int)


@dataclass(frozen=True)
class Signature:
    fn: str
    params: tuple[Param, ...]
    ret: str           # "void", a canonical scalar spelling or a template parameter
    template_params: tuple[str, ...]

    def scalar(self, base: str, scalar: str) -> str:
        """The C++ spelling of `base` with template parameters instantiated as `scalar`."""
        return scalar if base in self.template_params else base

    def floating(self, p: Param, scalar: str) -> bool:
        return self.scalar(p.base, scalar) in FLOATING


def _unqualified(spelling: str) -> str:
    return " ".join(re.sub(r"\b(const|volatile)\b", " ", spelling).split())


def _base(t, template_params) -> tuple[str, bool]:
    import clang.cindex as ci

    name = _unqualified(t.spelling)
    if name in template_params:
        return name, t.is_const_qualified()
    if t.get_canonical().kind == ci.TypeKind.ENUM:
        return "int", t.is_const_qualified()         # an enum: its int value
    return _unqualified(t.get_canonical().spelling), t.is_const_qualified()


# Headers are not needed to read a signature; leaving them out makes the parse ~50x faster
# (the one macro of torchclad/runtime.h a signature may spell is defined here).
_SIGNATURE_PRELUDE = ("namespace std { using size_t = decltype(sizeof 0); }\nusing size_t = decltype(sizeof 0);\n"
                      "#define TORCHCLAD_WRITE_ONCE\n")


def read_signature(path: Path, fn: str) -> Signature:
    import clang.cindex as ci

    text = re.sub(r"^[ \t]*#[ \t]*include\b.*$", "", path.read_text(), flags=re.M)
    tu = ci.Index.create().parse(
        "signature.cpp", args=["-x", "c++", "-std=c++17", "-nostdinc++"],
        unsaved_files=[("signature.cpp", _SIGNATURE_PRELUDE + text)],
        options=ci.TranslationUnit.PARSE_SKIP_FUNCTION_BODIES)
    for cur in tu.cursor.get_children():
        if cur.spelling != fn or cur.kind not in (ci.CursorKind.FUNCTION_DECL, ci.CursorKind.FUNCTION_TEMPLATE):
            continue
        tparams = tuple(c.spelling for c in cur.get_children() if c.kind == ci.CursorKind.TEMPLATE_TYPE_PARAMETER)
        params = []
        for c in cur.get_children():
            if c.kind != ci.CursorKind.PARM_DECL:
                continue
            t = c.type
            if t.kind == ci.TypeKind.POINTER:
                base, const = _base(t.get_pointee(), tparams)
                params.append(Param(c.spelling, base, True, const))
            elif t.kind in (ci.TypeKind.CONSTANTARRAY, ci.TypeKind.INCOMPLETEARRAY):
                base, const = _base(t.element_type, tparams)
                params.append(Param(c.spelling, base, True, const))
            elif t.kind in (ci.TypeKind.LVALUEREFERENCE, ci.TypeKind.RVALUEREFERENCE):
                base, const = _base(t.get_pointee(), tparams)
                params.append(Param(c.spelling, base, False, const, reference=True))
            else:
                base, const = _base(t, tparams)
                enum = t.spelling if t.get_canonical().kind == ci.TypeKind.ENUM else ""
                params.append(Param(c.spelling, base, False, const, enum=enum))
        ret, _ = _base(cur.result_type, tparams)
        return Signature(fn, tuple(params), ret, tparams)
    raise CorpusFailure("bad-case", f"{path.name} has no function {fn}")


# ---- values -----------------------------------------------------------------------------------------

@dataclass
class Inputs:
    """Buffers for every parameter (scalars as 1-element arrays; None for a null pointer)."""
    env: dict[str, np.ndarray | None]
    aliases: dict[str, str]              # param -> param whose buffer it shares
    seeds: dict[str, np.ndarray]         # floating output -> adjoint seed (float64)
    dy: float
    wrt: tuple[str, ...]                 # as the harness expects the engine to resolve it
    scalars: frozenset[str]              # parameters passed by value

    def copy_env(self) -> dict[str, np.ndarray | None]:
        out: dict[str, np.ndarray | None] = {}
        for name, arr in self.env.items():
            if name not in self.aliases:
                out[name] = None if arr is None else arr.copy()
        for name, of in self.aliases.items():
            out[name] = out[of]
        return out

    def values(self) -> dict[str, Any]:
        """What `Case.expected` receives."""
        v: dict[str, Any] = {}
        for name, arr in self.env.items():
            if arr is None:
                v[name] = None
            elif arr.shape == (1,) and name in self.scalars:
                v[name] = arr[0].item()
            else:
                v[name] = arr.astype(np.float64) if arr.dtype.kind == "f" else arr.copy()
        v["_seed"] = {k: s.copy() for k, s in self.seeds.items()}
        v["_dy"] = self.dy
        return v


def resolve_wrt(case, sig: Signature) -> tuple[str, ...]:
    names = [p.name for p in sig.params]
    if case.wrt is None:
        return tuple(p.name for p in sig.params if sig.floating(p, case.scalar))
    items = case.wrt if isinstance(case.wrt, (list, tuple)) else [w.strip() for w in case.wrt.split(",")]
    out = []
    for w in items:
        w = str(w).strip()
        out.append(names[int(w)] if w.isdigit() else w)
    return tuple(out)


def make_inputs(case, sig: Signature) -> Inputs:
    C = cases_module
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    names = [p.name for p in sig.params]
    if set(case.inputs) != set(names):
        raise CorpusFailure("bad-case", f"{case.name}: inputs {sorted(case.inputs)} != params {names}")
    env: dict[str, np.ndarray | None] = {}
    aliases: dict[str, str] = {}
    scalars = set()
    for p in sig.params:
        spec = case.inputs[p.name]
        dtype = _DTYPES[sig.scalar(p.base, case.scalar)]
        if isinstance(spec, C.Alias):
            aliases[p.name] = spec.of
            env[p.name] = None  # placeholder keeps parameter order; filled below
            continue
        if isinstance(spec, C.Null):
            if not p.pointer:
                raise CorpusFailure("bad-case", f"{case.name}: {p.name} is not a pointer")
            env[p.name] = None
            continue
        if isinstance(spec, C.Scalar):
            val = spec.value if spec.value is not None else rng.uniform(spec.lo, spec.hi)
            arr = np.array([val], dtype=dtype)
        elif isinstance(spec, C.Array):
            vals = spec.values if spec.values is not None else rng.uniform(spec.lo, spec.hi, spec.n)
            arr = np.array(vals, dtype=dtype)
        elif isinstance(spec, C.Int):
            arr = np.array([spec.value], dtype=dtype)
        elif isinstance(spec, C.IntArray):
            arr = np.array(spec.values, dtype=dtype)
        else:
            raise CorpusFailure("bad-case", f"{case.name}: unknown input spec {spec!r}")
        if p.pointer != isinstance(spec, (C.Array, C.IntArray)):
            raise CorpusFailure("bad-case", f"{case.name}: {p.name} pointer={p.pointer} but spec {spec!r}")
        if not p.pointer:
            scalars.add(p.name)
        env[p.name] = arr
    for name, of in aliases.items():
        env[name] = env[of]
    wrt = resolve_wrt(case, sig)
    seeds = {}
    for out in case.outputs:
        p = next(p for p in sig.params if p.name == out)
        if not p.pointer and not p.reference:
            raise CorpusFailure("bad-case", f"{case.name}: output {out} is not a pointer or a "
                                "reference")
        if sig.floating(p, case.scalar) and env[out] is not None:
            if out not in wrt:
                raise CorpusFailure("bad-case", f"{case.name}: floating output {out} must be in wrt to be seeded")
            seeds[out] = rng.uniform(-1.0, 1.0, env[out].shape)
    seeded = sig.ret != "void" and sig.scalar(sig.ret, case.scalar) in FLOATING
    return Inputs(env, aliases, seeds, case.dy if seeded else 0.0, wrt, frozenset(scalars))


# ---- C wrapper ----------------------------------------------------------------------------------------

_EXPORT = '#define TCC_EXPORT extern "C" __attribute__((visibility("default")))\n'


def _call(sig: Signature, scalar: str, fn: str) -> str:
    targs = f"<{', '.join(scalar for _ in sig.template_params)}>" if sig.template_params else ""
    args = []
    for k, p in enumerate(sig.params):
        t = sig.scalar(p.base, scalar)
        if p.enum:
            args.append(f"({p.enum})*(int*)a[{k}]")
        else:
            args.append(f"({t}*)a[{k}]" if p.pointer else f"*({t}*)a[{k}]")
    return f"{fn}{targs}({', '.join(args)}"


def primal_wrapper(sig: Signature, scalar: str, prefix: str) -> str:
    call = _call(sig, scalar, sig.fn) + ")"
    body = f"{call}; return 0.0;" if sig.ret == "void" else f"return (double)({call});"
    return _EXPORT + f"TCC_EXPORT double {prefix}_primal(void** a) {{ {body} }}\n"


def derivative_wrapper(sig: Signature, scalar: str, wrt: tuple[str, ...], prefix: str) -> str:
    by_name = {p.name: p for p in sig.params}
    dargs = "".join(f", ({sig.scalar(by_name[w].base, scalar)}*)d[{k}]" for k, w in enumerate(wrt))
    seeded = sig.ret != "void" and sig.scalar(sig.ret, scalar) in FLOATING
    dy = f", ({sig.scalar(sig.ret, scalar)})dy" if seeded else ""   # an int result: no seed
    forw = _call(sig, scalar, sig.fn + "_reverse_forw") + ", *(torchclad::Tape*)tape)"
    forw_body = f"{forw}; return 0.0;" if sig.ret == "void" else f"return (double)({forw});"
    return (
        primal_wrapper(sig, scalar, prefix)
        + f"TCC_EXPORT void {prefix}_pullback(void** a, double dy, void** d) {{ "
          f"{_call(sig, scalar, sig.fn + '_pullback')}{dy}{dargs}); }}\n"
        + f"TCC_EXPORT void* {prefix}_tape_new() {{ return new torchclad::Tape(); }}\n"
        + f"TCC_EXPORT void {prefix}_tape_delete(void* t) {{ delete (torchclad::Tape*)t; }}\n"
        + f"TCC_EXPORT int {prefix}_tape_empty(void* t) {{ return ((torchclad::Tape*)t)->empty() ? 1 : 0; }}\n"
        + f"TCC_EXPORT double {prefix}_forw(void** a, void* tape) {{ {forw_body} }}\n"
        + f"TCC_EXPORT void {prefix}_sweep(void** a, double dy, void** d, void* tape) {{ "
          f"{_call(sig, scalar, sig.fn + '_reverse_sweep')}{dy}{dargs}, *(torchclad::Tape*)tape); }}\n"
    )


# ---- compile and load ----------------------------------------------------------------------------------
#
# Parsing the runtime headers dominates a compile, so several cases are compiled into one .so, each
# inside a namespace of its own (the unit's text verbatim; its #includes are also hoisted in front of
# every namespace, where include guards make the inner copies no-ops). When the batch fails, the
# units its errors point into get those errors (renumbered to the unit's own lines) and the rest is
# compiled again. Text that could mean something else inside a namespace (::clad::, namespace std,
# extern "C", #define) is compiled alone, at global scope, exactly as the engine produced it.

BATCH = 64


@dataclass(frozen=True)
class Unit:
    key: tuple                 # memo key of the build
    text: str                  # the unit's translation unit, wrapper included
    prefix: str                # wrapper symbol prefix, also the namespace in a batch
    first_generated: int       # 1-based line of the generated code in text (0: none)


@dataclass
class Built:
    lib: ctypes.CDLL
    prefix: str
    so: Path
    warnings: list[str]              # -Wall diagnostics located in the generated code
    other_warnings: list[str]        # -Wall diagnostics elsewhere (kernel source, runtime headers)

    def fn(self, name: str, restype=None, argtypes=None):
        f = getattr(self.lib, f"{self.prefix}_{name}")
        f.restype = restype
        if argtypes is not None:
            f.argtypes = argtypes
        return f


_DIAG = re.compile(r"^(\S+?):(\d+):(\d+): (error|warning|note): (.*)$", re.M)


def _strip_line_directives(text: str) -> str:
    # `#line` would make diagnostics point into the kernel file; keep numbering of the text we compile
    return re.sub(r"^[ \t]*#[ \t]*line\b.*$", "// #line dropped by the corpus harness", text, flags=re.M)


def _compose(units: list[Unit]) -> tuple[str, list[tuple[int, int]]]:
    includes: list[str] = []
    for u in units:
        for m in re.finditer(r"^[ \t]*#[ \t]*include[^\n]*$", u.text, re.M):
            if m.group(0).strip() not in includes:
                includes.append(m.group(0).strip())
    parts = ["\n".join(includes)]
    line = len(includes) + 1
    regions = []
    for u in units:
        parts.append(f"namespace {u.prefix} {{")
        line += 1
        n = u.text.count("\n") + 1
        regions.append((line, line + n - 1))
        parts.append(u.text)
        parts.append(f"}}  // namespace {u.prefix}")
        line += n + 1
    return "\n".join(parts) + "\n", regions


# a diagnostic that is not a warning: errors, their notes and "required from here" lines
_BLAME = re.compile(r"^(\S+?):(\d+):(\d+):(?! warning:)(.*)$", re.M)


def _batchable(u: Unit) -> bool:
    """Text that would mean something else inside a namespace is built alone."""
    return not re.search(r"::\s*clad\s*::|namespace\s+(std|torchclad)\b|extern\s+\"C\"(?!\s*__attribute__)"
                         r"|#\s*define\s+(?!TCC_EXPORT\b)", u.text)


def _unit_errors(diags, text: str, lo: int, limit: int = 6) -> str:
    """A batch's diagnostics inside one unit, numbered and quoted as in the unit's own text."""
    lines = text.splitlines()
    errors = [m for m in diags if m.group(4).lstrip().startswith(("error", "fatal error"))] or diags
    out: list[str] = []
    for m in errors:
        ln = int(m.group(2)) - lo + 1
        src = lines[ln - 1].strip() if 0 < ln <= len(lines) else ""
        if len(src) > 240:
            src = src[:240] + " …"
        msg = re.sub(r"^\s*(fatal error|error):\s*", "", m.group(4))
        entry = f"line {ln}: {msg}" + (f"\n    | {src}" if src else "")
        if entry not in out:
            out.append(entry)
        if len(out) >= limit:
            break
    return "\n".join(out)


class Session:
    """Caches for one test session: signatures, inputs, derivatives, builds, FD, results."""

    def __init__(self, workdir: Path | None = None, only: set[str] | None = None,
                 cxxflags: tuple[str, ...] = ()):
        self.only = only  # case names a batch may build ahead (None: every case)
        self.cxxflags = tuple(cxxflags)  # added to every g++ run (e.g. SANITIZE_FLAGS)
        keep = os.environ.get("TORCHCLAD_CORPUS_KEEP")
        self.dir = Path(workdir or tempfile.mkdtemp(prefix="torchclad-corpus-"))
        if not keep and workdir is None:
            atexit.register(shutil.rmtree, self.dir, True)
        self._memo: dict[tuple, Any] = {}
        self._units = 0
        self.compile_seconds = 0.0
        self.compiles = 0
        self.engine_seconds = 0.0

    def _store(self, key: tuple, make: Callable[[], Any]) -> None:
        try:
            self._memo[key] = ("ok", make())
        except CorpusFailure as e:
            self._memo[key] = ("err", e)

    def _cached(self, key: tuple, make: Callable[[], Any]) -> Any:
        if key not in self._memo:
            self._store(key, make)
        status, value = self._memo[key]
        if status == "err":
            raise value
        return value

    # -- pieces --
    def signature(self, case) -> Signature:
        return self._cached(("sig", case.file, case.fn), lambda: read_signature(KERNELS / case.file, case.fn))

    def inputs(self, case) -> Inputs:
        return self._cached(("inputs", case.name), lambda: make_inputs(case, self.signature(case)))

    def derivative(self, case, analyses: bool):
        return self._cached(("deriv", case.build_key, analyses), lambda: self._differentiate(case, analyses))

    def _differentiate(self, case, analyses: bool):
        from torchclad.engine import DiffError, Options, differentiate

        path = KERNELS / case.file
        t0 = time.perf_counter()
        try:
            d = differentiate(path.read_text(), case.fn, case.wrt, filename=str(path),
                              options=Options(analyses=analyses))
        except DiffError as e:
            text = str(e)
            if not re.match(r"\S.*:\d+:\d+: ", text):  # docs/internals.md: messages start with file:line:col
                text += "  [and the message lacks the file:line:col: prefix]"
            raise CorpusFailure("diff-error", f"DiffError: {text}") from None
        except Exception as e:  # an engine crash is a failure of its own kind
            raise CorpusFailure("diff-error", f"engine raised {type(e).__name__}: {e}") from None
        finally:
            self.engine_seconds += time.perf_counter() - t0
        if len(d.params) != len(self.signature(case).params):
            raise CorpusFailure("interface", f"Derivative.params has {len(d.params)} entries for "
                                f"{len(self.signature(case).params)} parameters")
        return d

    def engine_wrt(self, case, analyses: bool) -> tuple[str, ...]:
        """Derivative.wrt as the kernel's own parameter names (matched by position)."""
        d = self.derivative(case, analyses)
        names = [p.name for p in d.params]
        sig = self.signature(case)
        try:
            return tuple(sig.params[names.index(w)].name for w in d.wrt)
        except ValueError:
            raise CorpusFailure("interface", f"Derivative.wrt {d.wrt} not among Derivative.params {names}") from None

    def interface_problems(self, case, analyses: bool) -> list[str]:
        """Where the Derivative's description of the kernel differs from the kernel's signature."""
        d = self.derivative(case, analyses)
        sig = self.signature(case)
        out = []
        got = [(p.name, int(p.pointer)) for p in d.params]
        want = [(p.name, int(p.pointer)) for p in sig.params]
        if got != want:
            out.append(f"Derivative.params (name, pointer) {got} != kernel's {want}")
        if tuple(d.wrt) != resolve_wrt(case, sig):
            out.append(f"Derivative.wrt {tuple(d.wrt)} != expected {resolve_wrt(case, sig)}")
        if tuple(d.template_params) != sig.template_params:
            out.append(f"template_params {d.template_params} != {sig.template_params}")
        ret = d.return_type.base
        if (ret == "void") != (sig.ret == "void"):
            out.append(f"return_type {ret!r}, kernel returns {sig.ret!r}")
        return out

    def _prefix(self) -> str:
        self._units += 1
        return f"tcc_u{self._units}"

    def _ref_unit(self, case) -> Unit:
        sig = self.signature(case)
        prefix = self._prefix()
        text = (KERNELS / case.file).read_text() + "\n" + primal_wrapper(sig, case.scalar, prefix)
        return Unit(("ref", case.build_key), text, prefix, 0)

    def _deriv_unit(self, case, opt: str, analyses: bool) -> Unit:
        d = self.derivative(case, analyses)
        sig = self.signature(case)
        tu = _strip_line_directives(d.translation_unit())
        at = tu.rfind(d.code) if d.code else -1
        first_gen = tu[:at].count("\n") + 1 if at >= 0 else 0
        prefix = self._prefix()
        text = tu + "\n" + derivative_wrapper(sig, case.scalar, self.engine_wrt(case, analyses), prefix)
        return Unit(("build", case.build_key, opt, analyses), text, prefix, first_gen)

    def _gcc(self, tag: str, text: str, opt: str) -> tuple[subprocess.CompletedProcess, Path, Path]:
        src, so = self.dir / f"{tag}.cpp", self.dir / f"{tag}.so"
        src.write_text(text)
        # -fopenmp: the omp_* cases' parallel loops run on several threads in every variant
        argv = [CXX, "-std=c++17", "-shared", "-fPIC", opt, "-Wall", "-fopenmp", "-fvisibility=hidden",
                *self.cxxflags, f"-I{RUNTIME_INCLUDE}", str(src), "-o", str(so)]
        t0 = time.perf_counter()
        # g++ is not run with the sanitizer runtime preloaded (--sanitize re-executes us with it)
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        proc = subprocess.run(argv, capture_output=True, text=True, env=env)
        self.compile_seconds += time.perf_counter() - t0
        self.compiles += 1
        return proc, src, so

    def _solo(self, u: Unit, opt: str) -> None:
        def make():
            proc, src, so = self._gcc(u.prefix, u.text, opt)
            if proc.returncode != 0:
                diags = [m for m in _BLAME.finditer(proc.stderr) if Path(m.group(1)).name == src.name]
                detail = _unit_errors(diags, u.text, 1) if diags else proc.stderr[-3000:]
                raise CorpusFailure("compile-error", f"g++ failed:\n{detail}")
            gen, other = _split_warnings(proc.stderr, src.name, 1, u.text.count("\n") + 1, u.first_generated, u.text)
            return Built(ctypes.CDLL(str(so)), u.prefix, so, gen, other)
        self._store(u.key, make)

    def _compile_units(self, units: list[Unit], opt: str) -> None:
        pending = []
        for u in units:
            if _batchable(u):
                pending.append(u)
            else:
                self._solo(u, opt)
        while len(pending) > 1:
            text, regions = _compose(pending)
            proc, src, so = self._gcc(f"batch_{pending[0].prefix}", text, opt)
            if proc.returncode == 0:
                lib = ctypes.CDLL(str(so))
                for u, (lo, hi) in zip(pending, regions):
                    first = lo + u.first_generated - 1 if u.first_generated else 0
                    gen, other = _split_warnings(proc.stderr, src.name, lo, hi, first, u.text)
                    self._memo[u.key] = ("ok", Built(lib, u.prefix, so, gen, other))
                return
            blamed = [m for m in _BLAME.finditer(proc.stderr) if Path(m.group(1)).name == src.name]
            bad = []
            for u, (lo, hi) in zip(pending, regions):
                mine = [m for m in blamed if lo <= int(m.group(2)) <= hi]
                if mine:
                    bad.append(u)
                    self._memo[u.key] = ("err", CorpusFailure("compile-error", "g++ failed:\n" + _unit_errors(mine, u.text, lo)))
            if not bad:
                break  # errors outside every unit: build each alone
            pending = [u for u in pending if u not in bad]
        for u in pending:
            self._solo(u, opt)

    def _batch(self, case, kind: str, opt: str, analyses: bool | None) -> None:
        """Build `case` together with up to BATCH−1 of the following cases not built yet."""
        start = next(k for k, c in enumerate(CASES) if c.build_key == case.build_key)
        units, seen = [], set()
        for c in CASES[start:] + CASES[:start]:
            key = ("ref", c.build_key) if kind == "ref" else ("build", c.build_key, opt, analyses)
            if key in self._memo or c.build_key in seen or (c is not case and self.only and c.name not in self.only):
                continue
            seen.add(c.build_key)
            try:
                units.append(self._ref_unit(c) if kind == "ref" else self._deriv_unit(c, opt, analyses))
            except CorpusFailure as e:
                self._memo[key] = ("err", e)
            if len(units) >= BATCH:
                break
        self._compile_units(units, opt)

    def reference(self, case) -> Built:
        """The primal alone, compiled from the kernel source (for finite differences)."""
        key = ("ref", case.build_key)
        if key not in self._memo:
            self._batch(case, "ref", "-O0", None)
        return self._cached(key, lambda: None)

    def build(self, case, opt: str, analyses: bool) -> Built:
        key = ("build", case.build_key, opt, analyses)
        if key not in self._memo:
            self._batch(case, "build", opt, analyses)
        return self._cached(key, lambda: None)

    # -- numbers --
    def finite_differences(self, case, scale: float = 1.0) -> dict[str, np.ndarray]:
        def make():
            built = self.reference(case)
            inp = self.inputs(case)
            return _in_child(lambda: _fd(built, case, inp, scale), f"{case.name} finite differences")
        return self._cached(("fd", case.name, scale), make)

    def reference_gradient(self, case) -> tuple[str, dict[str, np.ndarray]]:
        """("expected" | "fd", gradient by wrt name after alias folding)."""
        if case.expected is not None:
            return "expected", expected_gradient(case, self.inputs(case))
        return "fd", self.finite_differences(case)

    def run(self, case, opt: str, analyses: bool, path: str) -> "Run":
        """One variant's gradient and the problems its self-checks found. Raises CorpusFailure when
        there is no gradient at all (engine error, compile error, crash, hang)."""
        return self._cached(("run", case.name, opt, analyses, path), lambda: self._run(case, opt, analyses, path))

    def _run(self, case, opt, analyses, path):
        built = self.build(case, opt, analyses)
        inp = self.inputs(case)
        wrt = self.engine_wrt(case, analyses)
        what = f"{case.name} {opt} analyses={'on' if analyses else 'off'} {path}"
        raw = _in_child(lambda: _execute(built, inp, wrt, path), what)
        raw["sweep_writes_primal"] = self.derivative(case, analyses).sweep_writes_primal
        return Run(raw["grad"], _check_run(case, inp, wrt, path, raw))

    def check(self, case, opt: str, analyses: bool, path: str) -> dict[str, np.ndarray]:
        """Everything one test asserts about a variant; raises CorpusFailure listing every problem."""
        run = self.run(case, opt, analyses, path)
        problems = list(run.problems)
        try:
            compare_to_reference(self, case, run.grad)
        except CorpusFailure as e:
            problems.insert(0, e)
        if problems:
            kinds = ",".join(dict.fromkeys(p.kind for p in problems))
            raise CorpusFailure(kinds, "\n".join(p.message for p in problems))
        return run.grad


@dataclass
class Run:
    grad: dict[str, np.ndarray]        # by wrt name, aliases folded into their buffer's owner
    problems: list[CorpusFailure]      # self-check failures (inputs, accumulation, tape, forward)


def _split_warnings(stderr: str, src_name: str, lo: int, hi: int, first_generated: int,
                    text: str) -> tuple[list[str], list[str]]:
    """-Wall warnings of one unit (lines lo..hi of src_name): in its generated code, or elsewhere.

    A warning inside a header (the tape, say) belongs to the line of src_name it was inlined into."""
    gen, other = [], []
    lines = text.splitlines()
    inlined_at = None  # the last "inlined from ... at src:LINE" since the previous diagnostic
    for line in stderr.splitlines():
        at = re.search(r"inlined from .* at (\S+?):(\d+):\d+[:,]?$", line)
        if at and Path(at.group(1)).name == src_name:
            inlined_at = int(at.group(2))
            continue
        m = _DIAG.match(line)
        if not m:
            continue
        if m.group(4) == "warning":
            where, ln = Path(m.group(1)).name, int(m.group(2))
            if where != src_name and inlined_at is not None:
                where, ln, msg = src_name, inlined_at, f"{m.group(5)} (in {Path(m.group(1)).name}:{m.group(2)})"
            else:
                msg = m.group(5)
            if where != src_name:
                other.append(f"{where}:{ln}: {msg}")
            elif lo <= ln <= hi:
                k = ln - lo + 1
                code = f" | {lines[k - 1].strip()}" if 0 < k <= len(lines) else ""
                if first_generated and ln >= first_generated:
                    gen.append(f"line {k}: {msg}{code}")
                else:
                    other.append(f"kernel line {k}: {msg}{code}")
        inlined_at = None
    return gen, other


def expected_gradient(case, inp: Inputs) -> dict[str, np.ndarray]:
    """`case.expected` as arrays; for a non-void kernel it is ∂f/∂p, scaled here by the seed dy."""
    scale = inp.dy if inp.dy else 1.0
    return {k: scale * np.atleast_1d(np.asarray(v, dtype=np.float64))
            for k, v in case.expected(inp.values()).items()}


def _ptrs(arrays) -> ctypes.Array:
    return (ctypes.c_void_p * max(1, len(arrays)))(
        *[None if a is None else a.ctypes.data for a in arrays])


def _fold_aliases(inp: Inputs, grads: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = dict(grads)
    for name, of in inp.aliases.items():
        if name in out:
            g = out.pop(name)
            out[of] = out[of] + g if of in out else g
    return out


def _execute(built: Built, inp: Inputs, wrt: tuple[str, ...], path: str) -> dict:
    """Runs in the child: primal, then the gradient path with fill 0 and with ACCUMULATE_FILL."""
    vp, vpp = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
    primal = built.fn("primal", ctypes.c_double, [vpp])
    pullback = built.fn("pullback", None, [vpp, ctypes.c_double, vpp])
    tape_new = built.fn("tape_new", vp, [])
    tape_empty = built.fn("tape_empty", ctypes.c_int, [vp])
    tape_delete = built.fn("tape_delete", None, [vp])
    forw = built.fn("forw", ctypes.c_double, [vpp, vp])
    sweep = built.fn("sweep", None, [vpp, ctypes.c_double, vpp, vp])
    names = list(inp.env)
    res: dict[str, Any] = {}

    env = inp.copy_env()
    res["primal_ret"] = primal(_ptrs([env[n] for n in names]))
    res["primal_env"] = env

    def adjoints(fill: float) -> list:
        out = []
        for w in wrt:
            buf = inp.env[w]
            if buf is None:
                out.append(None)
            elif w in inp.seeds:
                out.append(inp.seeds[w].astype(buf.dtype))
            else:
                out.append(np.full(buf.shape, fill, dtype=buf.dtype))
        return out

    for fill in (0.0, ACCUMULATE_FILL):
        env = inp.copy_env()
        adj = adjoints(fill)
        a, dv = _ptrs([env[n] for n in names]), _ptrs(adj)
        if path == "pullback":
            pullback(a, inp.dy, dv)
        else:
            tape = tape_new()
            res[f"forw_ret_{fill}"] = forw(a, tape)
            res[f"forw_env_{fill}"] = {n: None if v is None else v.copy() for n, v in env.items()}
            sweep(a, inp.dy, dv, tape)
            res[f"tape_empty_{fill}"] = bool(tape_empty(tape))
            tape_delete(tape)
        res[f"env_{fill}"] = env
        res[f"adj_{fill}"] = {w: (np.zeros(0) if g is None else g.astype(np.float64)) for w, g in zip(wrt, adj)}
    res["grad"] = _fold_aliases(inp, res["adj_0.0"])
    return res


def _same_bits(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _close_or_nan(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> bool:
    return a.shape == b.shape and bool(np.all(np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)))


def _check_run(case, inp: Inputs, wrt, path: str, r: dict) -> list[CorpusFailure]:
    problems: list[CorpusFailure] = []
    # inputs (everything the kernel does not write) must come back untouched
    for fill in (0.0, ACCUMULATE_FILL):
        for name, orig in inp.env.items():
            if name in case.outputs or orig is None or name in inp.scalars:
                continue
            if not _same_bits(r[f"env_{fill}"][name], orig):
                problems.append(CorpusFailure("modified-input", f"{path} modified input {name}: "
                                              f"{orig.tolist()} -> {r[f'env_{fill}'][name].tolist()}"))
    # adjoints accumulate: pre-filled with c, non-seeded adjoints come back as c + grad
    for w in wrt:
        if w in inp.seeds or inp.env[w] is None:
            continue
        g0, gc = r["adj_0.0"][w], r[f"adj_{ACCUMULATE_FILL}"][w]
        tol = 1e-5 if inp.env[w].dtype == np.float32 else 1e-12
        scale = 1 + np.max(np.abs(np.nan_to_num(g0)), initial=0)
        if not _close_or_nan(gc - ACCUMULATE_FILL, g0, rtol=tol, atol=tol * scale):
            problems.append(CorpusFailure("accumulation", f"_d_{w} pre-filled with {ACCUMULATE_FILL} gave "
                                          f"{gc.tolist()}, expected {ACCUMULATE_FILL} + {g0.tolist()}"))
    if path == "split":
        for fill in (0.0, ACCUMULATE_FILL):
            if not r[f"tape_empty_{fill}"]:
                problems.append(CorpusFailure("tape", "tape not empty after f_reverse_sweep"))
            want, got = r["primal_ret"], r[f"forw_ret_{fill}"]
            if not _close_or_nan(np.array([got]), np.array([want]), 1e-12, 1e-14):
                problems.append(CorpusFailure("forward-mismatch", f"f_reverse_forw returned {got!r}, primal {want!r}"))
            for out in case.outputs:
                a, b = r[f"forw_env_{fill}"][out], r["primal_env"][out]
                if a is not None and not _close_or_nan(a.astype(np.float64), b.astype(np.float64), 1e-12, 1e-14):
                    problems.append(CorpusFailure("forward-mismatch", f"f_reverse_forw wrote {out} = {a.tolist()}, "
                                                  f"primal wrote {b.tolist()}"))
                # Derivative.sweep_writes_primal False promises the sweep leaves primal memory
                # as the forward left it (the bridge then skips copying outputs around it)
                if a is not None and r.get("sweep_writes_primal") is False and \
                        not _same_bits(r[f"env_{fill}"][out], a):
                    problems.append(CorpusFailure("sweep-writes-primal", f"f_reverse_sweep changed {out} "
                                                  f"({a.tolist()} -> {r[f'env_{fill}'][out].tolist()}) "
                                                  "though Derivative.sweep_writes_primal is False"))
    # the pre-filled run often repeats a symptom word for word
    unique: dict[str, CorpusFailure] = {}
    for p in problems:
        unique.setdefault(p.message, p)
    return list(unique.values())


def _fd(built: Built, case, inp: Inputs, scale: float) -> dict[str, np.ndarray]:
    """Central differences of L = dy·f + Σ seed·outputs with respect to every wrt buffer."""
    primal = built.fn("primal", ctypes.c_double, [ctypes.POINTER(ctypes.c_void_p)])
    names = list(inp.env)

    def objective(env) -> float:
        val = primal(_ptrs([env[n] for n in names]))
        total = inp.dy * val if inp.dy else 0.0
        for out, seed in inp.seeds.items():
            total += float(np.sum(seed * env[out].astype(np.float64)))
        return total

    grads = {}
    for w in inp.wrt:
        if w in inp.aliases:
            continue
        base = inp.env[w]
        if base is None:
            grads[w] = np.zeros(0)
            continue
        g = np.zeros(base.shape, dtype=np.float64)
        for k in range(base.size):
            x = float(base.flat[k])
            h = case.fd_h * scale * max(1.0, abs(x))
            env = inp.copy_env()
            env[w].flat[k] = x + h
            xp = float(env[w].flat[k])
            fp = objective(env)
            env = inp.copy_env()
            env[w].flat[k] = x - h
            xm = float(env[w].flat[k])
            fm = objective(env)
            g.flat[k] = (fp - fm) / (xp - xm)
        grads[w] = g
    return grads


# ---- forked execution ------------------------------------------------------------------------------------

def _one_openmp_thread() -> None:
    """In a forked child: OpenMP regions run on the calling thread. GNU OpenMP is not
    fork-safe: once the parent has run a parallel region (a built-in kernel in an earlier
    test), the child's first region waits for pool threads that fork did not copy. A region
    of one thread needs no pool. (Multi-threaded reverse sweeps are tested in-process by
    tests/test_openmp.py and tests/test_parallel_builtins.py at 1, 2 and 3 threads.)"""
    try:
        ctypes.CDLL("libgomp.so.1").omp_set_num_threads(1)
    except OSError:
        pass


def _in_child(fn: Callable[[], Any], what: str, timeout: float = CHILD_TIMEOUT) -> Any:
    """Run fn in a forked child; a crash or a hang becomes a CorpusFailure."""
    sys.stdout.flush()
    sys.stderr.flush()
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(rfd)
        _one_openmp_thread()
        try:
            payload = pickle.dumps(("ok", fn()))
        except BaseException as e:  # noqa: BLE001 - everything goes back to the parent
            payload = pickle.dumps(("err", CorpusFailure("crash", f"{type(e).__name__}: {e}")))
        with os.fdopen(wfd, "wb") as f:
            f.write(payload)
        os._exit(0)
    os.close(wfd)
    chunks, deadline = [], time.monotonic() + timeout
    with os.fdopen(rfd, "rb") as f:
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([f], [], [], max(0.0, left))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise CorpusFailure("timeout", f"{what}: no result after {timeout:.0f}s (infinite loop?)")
            chunk = os.read(f.fileno(), 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        raise CorpusFailure("crash", f"{what}: killed by {signal.Signals(os.WTERMSIG(status)).name}")
    if not chunks:  # e.g. a sanitizer's _exit(1), or generated code calling exit()
        raise CorpusFailure("crash", f"{what}: exited with status {os.waitstatus_to_exitcode(status)} "
                                     "without a result")
    kind, value = pickle.loads(b"".join(chunks))
    if kind == "err":
        raise value
    return value


# ---- sanitizers ----------------------------------------------------------------------------------------
#
# `--sanitize` builds the cases with SANITIZE_FLAGS at SANITIZE_OPT and runs every built variant under
# ASan + UBSan. The instrumented code is loaded into this uninstrumented Python, so ASan's runtime must
# be the first library of the process: the command re-executes itself with LD_PRELOAD set
# (sanitizer_env). Each run's forked child writes its stderr to a log of its own; any sanitizer report
# in it fails the variant (with -fno-sanitize-recover=all and abort_on_error=1 the first report also
# kills the child). numpy's buffers come from the intercepted malloc, so reads and writes past an
# argument array hit a redzone. Leak checking is off: the interpreter itself "leaks" at exit, and the
# children leave through os._exit (the tape's own leak checks are in tests/runtime).

SANITIZE_FLAGS = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g")
SANITIZE_OPT = "-O1"
SANITIZER_REPORT = re.compile(r"runtime error:|ERROR: \w*Sanitizer|SUMMARY: \w*Sanitizer")
_SANITIZED_MARK = "TORCHCLAD_CORPUS_SANITIZED"


def sanitizer_runtime() -> str:
    """The libasan.so of $CXX (what LD_PRELOAD needs)."""
    out = subprocess.run([CXX, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(out) or not os.path.exists(out):
        raise RuntimeError(f"{CXX} -print-file-name=libasan.so gave {out!r}: no ASan runtime installed")
    return out


def sanitizer_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a process that loads sanitized code: libasan preloaded, reports fatal."""
    env = dict(os.environ if base is None else base)
    env["LD_PRELOAD"] = " ".join(x for x in (sanitizer_runtime(), env.get("LD_PRELOAD", "")) if x)
    common = "abort_on_error=1:halt_on_error=1:print_summary=1:symbolize=1"
    env["ASAN_OPTIONS"] = f"{common}:detect_leaks=0:detect_stack_use_after_return=1:check_initialization_order=1"
    env["UBSAN_OPTIONS"] = f"{common}:print_stacktrace=1"
    env[_SANITIZED_MARK] = "1"
    return env


def asan_loaded() -> bool:
    """Is the ASan runtime mapped into this process (LD_PRELOAD took effect)?"""
    try:
        return "libasan" in Path("/proc/self/maps").read_text()
    except OSError:
        return False


def sanitized_child(fn: Callable[[], Any], what: str, log: Path, timeout: float = CHILD_TIMEOUT) -> tuple[str, Any]:
    """Run fn in a forked child whose stderr goes to `log`: (sanitizer report or "", fn's result).

    A report wins over the crash it caused; a crash without a report raises its CorpusFailure."""
    def child():
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 2)
        os.close(fd)
        return fn()

    failure, result = None, None
    try:
        result = _in_child(child, what, timeout)
    except CorpusFailure as e:
        failure = e
    text = log.read_text(errors="replace") if log.exists() else ""
    if SANITIZER_REPORT.search(text):
        return text, None
    if failure is not None:
        if text.strip():
            failure = CorpusFailure(failure.kind, f"{failure.message}\nstderr:\n{text[-3000:]}")
        raise failure
    return "", result


def sanitizer_report(session: Session, case, analyses: bool, path: str) -> str:
    """One variant of `case`, built with the session's flags (SANITIZE_FLAGS), run with its stderr
    captured: the sanitizer's report, or "" when the run was clean. Raises CorpusFailure when the
    variant cannot be built or crashes without a report."""
    built = session.build(case, SANITIZE_OPT, analyses)
    inp = session.inputs(case)
    wrt = session.engine_wrt(case, analyses)
    tag = f"{case.name}_{'an' if analyses else 'noan'}_{path}"
    what = f"{case.name} {SANITIZE_OPT} analyses={'on' if analyses else 'off'} {path} (sanitized)"
    report, _ = sanitized_child(lambda: _execute(built, inp, wrt, path), what, session.dir / f"{tag}.stderr")
    return report


def sanitize_main(chosen: list, argv: list[str], analyses_modes: tuple[bool, ...]) -> int:
    """`--sanitize`: every chosen case, both paths, under ASan + UBSan; prints each report."""
    if not asan_loaded():
        if os.environ.get(_SANITIZED_MARK):
            print("--sanitize: libasan is not loaded although LD_PRELOAD names it", file=sys.stderr)
            return 2
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable, str(Path(__file__).resolve()), *argv], sanitizer_env())
    session = Session(only={c.name for c in chosen}, cxxflags=SANITIZE_FLAGS)
    t0 = time.perf_counter()
    clean, reports, errors, rejected = 0, [], [], []
    for case in chosen:
        for analyses in analyses_modes:
            for path in PATHS:
                tag = f"{case.name} {'an' if analyses else 'noan'} {path}"
                try:
                    report = sanitizer_report(session, case, analyses, path)
                except CorpusFailure as e:
                    if e.kind == "diff-error":  # the engine rejects the kernel: nothing to run
                        rejected.append(tag)
                    else:
                        errors.append(tag)
                        print(f"ERROR {tag}: {e}")
                    continue
                if report:
                    reports.append(tag)
                    lines = report.strip().splitlines()
                    shown = "\n    ".join(lines[:80] + (["..."] if len(lines) > 80 else []))
                    print(f"REPORT {tag}:\n    {shown}")
                else:
                    clean += 1
    print(f"sanitized variants: {clean} clean, {len(reports)} with reports, {len(errors)} errors, "
          f"{len(rejected)} rejected by the engine ({', '.join(rejected) or 'none'}); "
          f"{session.compiles} compiles ({session.compile_seconds:.1f}s); flags {' '.join(SANITIZE_FLAGS)} "
          f"{SANITIZE_OPT}; total {time.perf_counter() - t0:.1f}s")
    return 1 if reports or errors else 0


# ---- comparisons used by the tests ------------------------------------------------------------------------

def compare_to_reference(session: Session, case, grad: dict[str, np.ndarray]) -> None:
    how, want = session.reference_gradient(case)
    inp = session.inputs(case)
    keys = [w for w in inp.wrt if w not in inp.aliases and inp.env[w] is not None]
    problems = []
    for w in keys:
        if w not in want:
            raise CorpusFailure("bad-case", f"{case.name}: expected has no gradient for {w}")
        if w not in grad:
            problems.append(f"d{w}: the derivative has no adjoint parameter for {w}")
            continue
        g, e = grad[w], want[w]
        if g.shape != e.shape or not np.all(np.isclose(g, e, rtol=case.rtol, atol=case.atol)):
            err = np.max(np.abs(g - e)) if g.shape == e.shape else float("nan")
            problems.append(f"d{w}: got {np.array2string(g, precision=10)}\n"
                            f"      want {np.array2string(e, precision=10)} ({how}; max abs err {err:.3g})")
    if problems:
        raise CorpusFailure("wrong-gradient", "\n".join(problems))


UNINITIALIZED = ("-Wuninitialized", "-Wmaybe-uninitialized")


def warnings_report(session: Session, cases) -> tuple[list[str], dict[str, list[str]]]:
    """-Wall warnings in generated code, as (summary lines, {case: uninitialised-read warnings})."""
    kinds: dict[str, set[str]] = {}
    uninit: dict[str, list[str]] = {}
    for case in cases:
        for opt in OPT_LEVELS:
            for analyses in (True, False):
                key = ("build", case.build_key, opt, analyses)
                status, built = session._memo.get(key, ("missing", None))
                if status != "ok":
                    continue
                tag = f"{opt} {'an' if analyses else 'noan'}"
                for w in built.warnings:
                    flag = re.search(r"\[(-W[\w-]+)\]", w)
                    kinds.setdefault(flag.group(1) if flag else w, set()).add(case.name)
                    if flag and flag.group(1) in UNINITIALIZED:
                        uninit.setdefault(case.name, []).append(f"{tag} {w}")
    lines = [f"{flag}: {len(names)} cases ({', '.join(sorted(names)[:6])}{', …' if len(names) > 6 else ''})"
             for flag, names in sorted(kinds.items())]
    return lines, uninit


def variant_tolerance(session: Session, case) -> float:
    sig = session.signature(case)
    floats = {sig.scalar(p.base, case.scalar) for p in sig.params if sig.floating(p, case.scalar)}
    return 1e-5 if "float" in floats else 1e-12


def variant_disagreements(session: Session, case, grads: dict[str, dict[str, np.ndarray]]) -> list[str]:
    """Every variant's gradient against the first one's, to ~1e-12 (float kernels: 1e-5)."""
    tol = variant_tolerance(session, case)
    items = list(grads.items())
    out = []
    for tag, g in items[1:]:
        ref_tag, ref = items[0]
        for w, r in ref.items():
            x = g.get(w)
            scale = 1 + np.max(np.abs(np.nan_to_num(r)), initial=0)
            if x is None or not _close_or_nan(x, r, rtol=tol, atol=tol * scale):
                out.append(f"d{w}: {tag} gives {None if x is None else x.tolist()}, {ref_tag} gives {r.tolist()}")
    return out


def all_variants(case):
    for opt in OPT_LEVELS:
        for analyses in (True, False):
            for path in PATHS:
                yield opt, analyses, path


# ---- command line -----------------------------------------------------------------------------------------

def check_reference(session: Session, case) -> None:
    """The corpus checks itself: FD finite and stable under a 4x step; expected agrees with FD."""
    inp = session.inputs(case)
    if case.expected is not None:
        want = expected_gradient(case, inp)
        keys = {w for w in inp.wrt if w not in inp.aliases and inp.env[w] is not None}
        if not keys <= set(want):
            raise CorpusFailure("bad-case", f"{case.name}: expected lacks {sorted(keys - set(want))}")
    fd = session.finite_differences(case)
    if case.expected is not None and not case.fd_agrees:
        return
    fd4 = session.finite_differences(case, 4.0)
    for w, g in fd.items():
        if not np.all(np.isfinite(g)):
            raise CorpusFailure("bad-case", f"{case.name}: FD of {w} not finite: {g}")
        if not np.allclose(g, fd4[w], rtol=max(case.rtol, 1e-6) * 10, atol=max(case.atol, 1e-8) * 10):
            raise CorpusFailure("bad-case", f"{case.name}: FD of {w} unstable (kink within h?): {g} vs {fd4[w]}")
    if case.expected is not None:
        for w, g in fd.items():
            if w in want and g.size and not np.allclose(g, want[w], rtol=case.rtol, atol=case.atol):
                raise CorpusFailure("bad-case", f"{case.name}: expected {w} {want[w]} disagrees with FD {g}")


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*")
    ap.add_argument("--reference", action="store_true", help="only check the corpus itself (no engine)")
    ap.add_argument("--opt", default=",".join(OPT_LEVELS))
    ap.add_argument("--keep", action="store_true", help="keep the build directory")
    ap.add_argument("--failures-md", metavar="PATH", help="also write the failing cases' symptoms as markdown")
    ap.add_argument("--sanitize", action="store_true",
                    help=f"run every case's derivative built with {' '.join(SANITIZE_FLAGS)} {SANITIZE_OPT} "
                         "(pullback and split) and report what ASan / UBSan find")
    ap.add_argument("--both-analyses", action="store_true", help="with --sanitize: analyses on and off (default: on)")
    args = ap.parse_args(argv)
    if args.keep:
        os.environ["TORCHCLAD_CORPUS_KEEP"] = "1"
    sys.path.insert(0, str(REPO))
    chosen = [CASES_BY_NAME[n] for n in args.cases] if args.cases else CASES
    if args.sanitize:
        return sanitize_main(chosen, argv, (True, False) if args.both_analyses else (True,))
    session = Session(only={c.name for c in chosen})
    opts = [o if o.startswith("-") else "-" + o for o in args.opt.split(",")]
    t0 = time.perf_counter()
    failed = 0
    report: list[tuple[Any, dict[str, list[str]]]] = []
    for case in chosen:
        if args.reference:
            try:
                check_reference(session, case)
                print(f"ok    {case.name}")
            except CorpusFailure as e:
                failed += 1
                print(f"FAIL  {case.name}: {e}")
            continue
        symptoms: dict[str, list[str]] = {}
        results = {}
        for opt, analyses, path in all_variants(case):
            if opt not in opts:
                continue
            tag = f"{opt} {'an' if analyses else 'noan'} {path}"
            try:
                results[tag] = session.check(case, opt, analyses, path)
            except CorpusFailure as e:
                symptoms.setdefault(str(e), []).append(tag)
        for text in variant_disagreements(session, case, results):
            symptoms.setdefault("[variants-differ] " + text, []).append("")
        for analyses in (True, False):
            try:
                for text in session.interface_problems(case, analyses):
                    symptoms.setdefault("[interface] " + text, []).append("an" if analyses else "noan")
            except CorpusFailure:
                pass
        report.append((case, symptoms))
        if symptoms:
            failed += 1
            print(f"FAIL  {case.name}")
            for text, tags in symptoms.items():
                print(f"  variants: {', '.join(tags)}")
                print("    " + text.replace("\n", "\n    "))
        else:
            print(f"ok    {case.name}")
    summary = (f"{len(chosen) - failed}/{len(chosen)} cases ok; {session.compiles} compiles "
               f"({session.compile_seconds:.1f}s); engine {session.engine_seconds:.1f}s; "
               f"total {time.perf_counter() - t0:.1f}s")
    print(f"{summary}; dir {session.dir}")
    if args.failures_md and not args.reference:
        Path(args.failures_md).write_text(failures_markdown(report, summary, *warnings_report(session, chosen)))
    return 1 if failed else 0


def failures_markdown(report, summary: str, warning_lines: list[str], uninit: dict[str, list[str]]) -> str:
    """Symptoms by case; cases the engine rejects outright are listed first."""
    rejected, failing = [], []
    for case, symptoms in report:
        if not symptoms:
            continue
        only_diff_error = all(text.startswith("[diff-error]") for text in symptoms)
        (rejected if only_diff_error else failing).append((case, symptoms))
    out = ["# Engine failures seen by the AD corpus", "",
           "Written by `python tests/corpus_harness.py --failures-md tests/corpus/ENGINE_FAILURES.md`.",
           f"Result: {summary}.", "",
           "Variant tags: `-O0`/`-O2`, `an`/`noan` (Options(analyses=True/False)), `pullback`/`split`.", ""]
    out += ["## Rejected by the engine with a DiffError", ""]
    for case, symptoms in rejected:
        for text in symptoms:
            out.append(f"- `{case.name}` ({case.file}, `{case.fn}`): {text.removeprefix('[diff-error] ')}")
    out += ["", "## Failing cases", ""]
    for case, symptoms in failing:
        out += [f"### {case.name}", "", f"`{case.fn}` in `tests/corpus/kernels/{case.file}`; "
                f"tags: {', '.join(case.tags)}", ""]
        for text, tags in symptoms.items():
            where = ", ".join(t for t in tags if t) or "all"
            body = text if len(text) < 4000 else text[:4000] + "\n…"
            out += [f"- variants: {where}", "", "```", body, "```", ""]
    out += ["## -Wall in generated code", "",
            "Reported, not failed, except reads of uninitialised values "
            "(test_generated_code_reads_nothing_uninitialized):", ""]
    out += [f"- {line}" for line in warning_lines] or ["- none"]
    for name, items in uninit.items():
        out += ["", f"Uninitialised read in `{name}`:", ""] + [f"- {w}" for w in items]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
