"""``torchclad aot``: a C++ kernel as a LibTorch op for C++ programs, with no Python at run time.

:func:`write_op` takes the engine's :class:`~torchclad.engine.Derivative` of a kernel and a
:class:`~torchclad.toolchain.libtorch_spec.Spec` and writes, into one directory::

    <op>.h             namespace torchclad_ops { <outputs> <op>(const at::Tensor& ...); }
    <op>.cpp           the kernel and its generated functions (f, f_reverse_forw,
                       f_reverse_sweep, callees) in a namespace of their own; the op's
                       OpInfo, its facts and calls (plan: the checks, sizes and output shapes
                       of a call); the TORCH_LIBRARY registration of torchclad_ops::<op> with
                       a CompositeExplicitAutograd and an Autograd kernel; <op>() itself,
                       which calls the op through the dispatcher
    torchclad/         the runtime (copied from the package): the tape (tape.h, parallel.h, forward.h, runtime.h,
                       math.h); libtorch.h / libtorch.cpp, what every op shares: the
                       torch::autograd::Function, the kernels' bodies, the checks' messages
    torchclad/vecmath.h  where this machine's glibc has libmvec: SIMD declarations of the
                       libm functions (as for the built-in kernels, torchclad.toolchain.isa)
    CMakeLists.txt     an OBJECT library ``torchclad_ops`` of every op in the directory:
                       ``add_subdirectory(DIR)`` after ``find_package(Torch)``, then
                       ``target_link_libraries(app PRIVATE torchclad_ops)``; with g++ and
                       vecmath.h, the ops' math calls vectorise (option TORCHCLAD_VECMATH);
                       option TORCHCLAD_NATIVE (OFF) compiles them with -march=native

The op behaves as the Python bridge's (torchclad/bridge/op.py): split mode (the forward records
on a tape, the backward runs only the reverse sweep), the same checks and messages, float32 and
float64 from one template kernel. What the engine knows is read from the Derivative (params,
adjoints, ``sweep_writes_primal``); nothing is parsed back from generated text.

Forward mode: the engine generates reverse mode only today. When it also generates forward-mode
functions (``f_darg0``, Clad's ``differentiate``), they belong in the kernel's namespace beside
the reverse functions: :func:`write_op` takes them as ``extra_functions`` (``(name, text)``
pairs, as ``Derivative.functions``) and they are compiled with the op, callable from C++ as
``torchclad_op_<op>::k::<name>``; nothing else changes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from .glue import GlueError, make_tu, scalar_types
from .libtorch_cpp import MARK, NAMESPACE, op_source
from .aot import write_if_changed
from .libtorch_spec import CppExpr, Spec, SpecError, Translator

__all__ = ["write_op", "generate", "RUNTIME_FILES", "NAMESPACE", "SpecError"]

#: the runtime an op needs, copied from csrc/runtime/torchclad: the tape's headers, and the
#: LibTorch part (libtorch.h, and libtorch.cpp, compiled once per torchclad_ops target)
RUNTIME_FILES = ("runtime.h", "tape.h", "parallel.h", "forward.h", "math.h", "libtorch.h",
                 "libtorch.cpp")
# Standard headers kernels use, included before the kernel's namespace opens (their include
# guards keep them out of it); the kernel's own <...> includes are added.
_PRE_INCLUDES = ("cmath", "cstddef", "cstdint", "cstdlib", "cstring", "algorithm", "limits",
                 "utility", "vector", "array")
_AT_DTYPE = {"float32": "at::kFloat", "float64": "at::kDouble", "int32": "at::kInt",
             "int64": "at::kLong", "int16": "at::kShort", "int8": "at::kChar",
             "uint8": "at::kByte", "bool": "at::kBool"}
_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def generate(source: str, name: str, wrt: Any = None, *, spec: Spec, out_dir: str | Path,
             filename: str = "kernel.cpp", op_name: str | None = None) -> list[Path]:
    """Differentiate ``name`` in ``source`` and write its LibTorch op into ``out_dir``."""
    from torchclad.engine import differentiate

    d = differentiate(source, name, wrt, filename=filename)
    return write_op(d, spec, out_dir, op_name=op_name)


def write_op(d: Any, spec: Spec, out_dir: str | Path, *, op_name: str | None = None,
             extra_functions: Sequence[tuple[str, str]] = ()) -> list[Path]:
    """Write the op of Derivative ``d`` (see the module docstring) as ``torchclad_ops::<op_name>``
    (default: the kernel's name); returns the files written (header and source first)."""
    op = OpModel(d, spec, op_name)
    header, source = op.header(), op.source(extra_functions)  # every refusal before a write
    out = Path(out_dir)
    (out / "torchclad").mkdir(parents=True, exist_ok=True)
    written = [_write(out / f"{op.name}.h", header), _write(out / f"{op.name}.cpp", source)]
    written += _copy_runtime(out / "torchclad")
    written += _vecmath(out / "torchclad")
    written.append(_write(out / "CMakeLists.txt", _cmake(out)))
    return written


def _write(path: Path, text: str) -> Path:
    write_if_changed(path, text)
    return path


def _copy_runtime(dest: Path) -> list[Path]:
    from .compiler import runtime_include_dir

    root = runtime_include_dir()
    if root is None:
        raise FileNotFoundError("torchclad's runtime headers (torchclad/runtime.h) are missing "
                                "from this installation; reinstall torchclad")
    return [_write(dest / h, (root / "torchclad" / h).read_text()) for h in RUNTIME_FILES]


def _vecmath(dest: Path) -> list[Path]:
    """``torchclad/vecmath.h``: SIMD declarations of the libm functions this machine's libmvec
    has (torchclad.toolchain.isa's probe and header, as for the built-in kernels); the
    CMakeLists.txt force-includes it into the ops' sources. Probed once per directory; none
    written where there is no libmvec."""
    header = dest / "vecmath.h"
    if header.exists():
        return [header]
    from .compiler import compiler
    from .isa import vecmath_functions, vecmath_header

    found = vecmath_functions(compiler())
    if not found:
        return []
    decls = "\n".join(ln for ln in vecmath_header(found).splitlines() if not ln.startswith("//"))
    return [_write(header, "// Generated by torchclad aot: SIMD declarations of the libm functions "
                           "below,\n// whose vector versions glibc's libmvec has (linked with "
                           "-lmvec). Force-included\n// into the ops' sources by CMakeLists.txt "
                           "(option TORCHCLAD_VECMATH), with -fno-math-errno.\n" + decls + "\n")]


def _cmake(out: Path) -> str:
    ops = sorted(p.name for p in out.glob("*.cpp") if p.read_text().startswith(MARK))
    srcs = "\n".join(f"  ${{CMAKE_CURRENT_SOURCE_DIR}}/{s}" for s in ops)
    return f"""\
# generated by torchclad aot; rewritten by every `torchclad aot -o <this directory>`.
# The ops of this directory as an OBJECT library:
#   find_package(Torch REQUIRED)          # CMAKE_PREFIX_PATH: torch.utils.cmake_prefix_path
#   add_subdirectory(<this directory>)
#   target_link_libraries(app PRIVATE torchclad_ops)
cmake_minimum_required(VERSION 3.18)
if(NOT TARGET torch)
  message(FATAL_ERROR "torchclad ops: call find_package(Torch REQUIRED) before add_subdirectory()")
endif()
if(NOT TARGET torchclad_ops)
  # the runtime every op shares, compiled once (also when several directories add ops)
  add_library(torchclad_ops OBJECT ${{CMAKE_CURRENT_SOURCE_DIR}}/torchclad/libtorch.cpp)
  target_compile_definitions(torchclad_ops PRIVATE TORCHCLAD_SHARED_RUNTIME)
  target_link_libraries(torchclad_ops PUBLIC ${{TORCH_LIBRARIES}})
  set_target_properties(torchclad_ops PROPERTIES CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON
                        POSITION_INDEPENDENT_CODE ON)
endif()
set(torchclad_ops_here
{srcs})
target_include_directories(torchclad_ops PUBLIC ${{CMAKE_CURRENT_SOURCE_DIR}})
target_sources(torchclad_ops PRIVATE ${{torchclad_ops_here}})

# Vector math: with g++ and glibc's libmvec (torchclad/vecmath.h, written where torchclad aot
# found it), exp / log / tanh / erf in the kernels' loops vectorise, as in torchclad's own
# build of its built-in kernels (no -ffast-math: only -fno-math-errno). OFF: libm's scalar calls.
set(torchclad_ops_flags "")
option(TORCHCLAD_VECMATH "vectorised math calls in the torchclad ops (g++, glibc libmvec)" ON)
if(TORCHCLAD_VECMATH AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU"
   AND EXISTS ${{CMAKE_CURRENT_SOURCE_DIR}}/torchclad/vecmath.h)
  list(APPEND torchclad_ops_flags -fno-math-errno --param=vect-max-version-for-alias-checks=100
       -include ${{CMAKE_CURRENT_SOURCE_DIR}}/torchclad/vecmath.h)
  target_link_libraries(torchclad_ops PUBLIC mvec)
endif()

# The building machine's instruction set (AVX2, AVX-512 ...) for the ops' kernels, as torchclad's
# built-in kernels get at run time. OFF by default: the program then runs on any x86-64 CPU, with
# the kernels' loops in SSE2, while LibTorch's own ops pick their ISA at run time. ON: faster
# kernels, and a program that only runs on CPUs with this one's instructions.
option(TORCHCLAD_NATIVE "compile the torchclad ops for this machine's CPU (-march=native)" OFF)
if(TORCHCLAD_NATIVE)
  include(CheckCXXCompilerFlag)
  check_cxx_compiler_flag(-march=native TORCHCLAD_HAS_MARCH_NATIVE)
  if(TORCHCLAD_HAS_MARCH_NATIVE)
    list(APPEND torchclad_ops_flags -march=native)
  else()
    message(WARNING "TORCHCLAD_NATIVE: ${{CMAKE_CXX_COMPILER_ID}} does not take -march=native; "
                    "the torchclad ops are compiled for the baseline instruction set")
  endif()
endif()
if(torchclad_ops_flags)
  set_source_files_properties(${{torchclad_ops_here}} TARGET_DIRECTORY torchclad_ops PROPERTIES
    COMPILE_OPTIONS "${{torchclad_ops_flags}}")
endif()
"""


def _dtype(base: str) -> str:
    """The at::ScalarType of an array of C++ scalar ``base`` (``float`` -> ``at::kFloat``)."""
    from torchclad.bridge.kernel import BASE_DTYPE, dtype_name  # the bridge's table

    dt = BASE_DTYPE.get(base)
    if dt is None or dtype_name(dt) not in _AT_DTYPE:
        raise SpecError(f"{base}: no torch dtype for arrays of this type; torchclad passes "
                        "arrays of float, double, a template type T, or integer/bool types")
    return _AT_DTYPE[dtype_name(dt)]


class OpModel:
    """The op of one Derivative and Spec: what is checked at aot time, and the C++ text."""

    def __init__(self, d: Any, spec: Spec, op_name: str | None = None):
        self.d, self.spec = d, spec
        self.name = op_name or d.name
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.name):
            raise SpecError(f"op name {self.name!r}: expected a C++ identifier")
        self.by_name = {p.name: p for p in d.params}
        self.template = tuple(d.template_params)
        ret = d.return_type
        self.ret = None if (ret is None or (ret.base == "void" and not ret.pointer)) else ret
        try:
            self.scalars = scalar_types(d)
        except GlueError as e:
            raise SpecError(str(e)) from None
        self.inputs = tuple(spec.inputs)
        self.outputs = tuple(spec.outputs)
        self._check()
        # pointer adjoints (slots of the sweep's adj vector) and scalar ones (locals)
        self.ptr_adj = [w for w in d.adjoints if self.by_name[w].pointer]

    # ---- the spec against the signature (the Python bridge's rules, op.py _check_spec)

    def is_float(self, p: Any) -> bool:
        return p.base in ("float", "double") or p.base in self.template

    def _check(self) -> None:
        s, sig = self.spec, f"{self.d.name}({', '.join(p.name for p in self.d.params)})"
        for group, names in (("inputs", s.inputs), ("outputs", tuple(s.outputs)),
                             ("sizes", tuple(s.sizes)), ("indices", tuple(s.indices))):
            for n in names:
                if n not in self.by_name:
                    raise SpecError(f"{group}: {n!r} is not a parameter of {sig}")
        if not s.inputs:
            raise SpecError(f"{sig}: the op needs at least one input tensor (inputs)")
        if len(set(s.inputs)) != len(s.inputs):
            raise SpecError(f"inputs: a parameter is listed twice in {list(s.inputs)}")
        for n in s.inputs:
            p = self.by_name[n]
            if not p.pointer:
                raise SpecError(f"inputs: {n!r} of {sig} is a scalar; give scalars in sizes")
            if not self.is_float(p):
                _dtype(p.base)
        for n in s.outputs:
            p = self.by_name[n]
            if not p.pointer or p.const:
                what = "a scalar" if not p.pointer else "a const pointer (read-only)"
                raise SpecError(f"outputs: {n!r} of {sig} is {what}; outputs are the arrays "
                                "the kernel writes")
            if s.outputs[n] is None and n not in s.inputs:
                raise SpecError(f"outputs: {n!r} needs a shape (only an output that is also an "
                                "input may leave it null)")
            if self.is_float(p) and n not in self.d.adjoints:
                raise SpecError(f"{sig}: output {n!r} has no adjoint in the generated pullback "
                                f"(adjoints: {list(self.d.adjoints)}); outputs must be "
                                "differentiated to be seeded")
        for n in s.sizes:
            if self.by_name[n].pointer:
                raise SpecError(f"sizes: {n!r} of {sig} is a pointer; list arrays in inputs or "
                                "outputs")
        for n in s.indices:
            p = self.by_name[n]
            if n not in s.inputs or self.is_float(p):
                raise SpecError(f"indices: {n!r} must be an integer input")
        for p in self.d.params:
            if p.pointer and p.name not in s.inputs and p.name not in s.outputs:
                raise SpecError(f"{sig}: pointer parameter {p.name!r} is in neither inputs nor "
                                "outputs")
            if not p.pointer and p.name not in s.sizes:
                raise SpecError(f"{sig}: scalar parameter {p.name!r} has no value; add it to "
                                f"sizes, e.g. \"{p.name}\": \"x.numel()\"")
        if not s.outputs and self.ret is None:
            raise SpecError(f"{sig}: a void kernel needs at least one entry in outputs")

    # ---- facts

    def out_params(self) -> list:
        return [self.by_name[n] for n in self.outputs] + ([self.ret] if self.ret else [])

    def dtype_code(self, p: Any) -> str:
        """C++ expression of ``p``'s dtype in plan()/out_dtype(): ``s`` for a template type."""
        return "s" if p.base in self.template else _dtype(p.base)

    def buffer(self, n: str) -> str:
        return f"b[{self.inputs.index(n)}]" if n in self.inputs else f"o[{self.outputs.index(n)}]"

    # ---- text

    def header(self) -> str:
        ins = ", ".join(f"const at::Tensor& {n}" for n in self.inputs)
        lines = [f"{MARK} from {self.d.filename}, function {self.d.name}; do not edit.",
                 "#pragma once", "", "#include <ATen/core/Tensor.h>", "", "#include <tuple>", "",
                 f"namespace {NAMESPACE} {{", ""]
        lines += [f"// {ln}" if ln else "//" for ln in self.describe()]
        lines += [f"{self.result_type()} {self.name}({ins});", "", f"}}  // namespace {NAMESPACE}",
                  ""]
        return "\n".join(lines)

    def describe(self) -> list[str]:
        """The op's contract, for the header comment."""
        outs = ", ".join(self.outputs) + (", <return value>" if self.ret else "")
        out = [f"{self.name}({', '.join(self.inputs)}) -> ({outs}); "
               f"registered as {NAMESPACE}::{self.name}.",
               f"Kernel: {self.d.name} in {self.d.filename}; float types: "
               f"{', '.join({'float': 'float32', 'double': 'float64'}[s] for s in self.scalars)}."]
        for n in self.inputs:
            out.append(f"  input  {n:<10} {self.by_name[n].c_type()}")
        for n in self.outputs:
            shape = self.spec.outputs[n]
            out.append(f"  output {n:<10} {self.by_name[n].c_type()}, shape "
                       f"{'of input ' + n if shape is None else shape}")
        if self.ret:
            out.append(f"  output <return> {self.ret.c_type()}, a 0-dim tensor")
        for n, e in self.spec.sizes.items():
            out.append(f"  size   {n:<10} = {e}")
        for c in self.spec.checks:
            out.append(f"  check  {c}")
        grads = [n for n in self.inputs if self.grad_slot(n) >= 0]
        out.append("Gradients (autograd, generated reverse sweep): "
                   + (", ".join(grads) if grads else "none") + ".")
        return out

    def result_type(self) -> str:
        n = len(self.outputs) + bool(self.ret)
        return "at::Tensor" if n == 1 else f"std::tuple<{', '.join(['at::Tensor'] * n)}>"

    def grad_slot(self, n: str) -> int:
        p = self.by_name[n]
        return self.ptr_adj.index(n) if (self.is_float(p) and n in self.ptr_adj) else -1

    def source(self, extra_functions: Sequence[tuple[str, str]]) -> str:
        return op_source(self, extra_functions)

    def kernel_text(self) -> str:
        """The translation unit: the kernel's source and its generated functions."""
        return make_tu(self.d).text

    def pre_includes(self) -> list[str]:
        found = []
        for kind, h in _INCLUDE.findall(self.d.source):
            if kind == '"':
                raise SpecError(
                    f"{self.d.filename}: #include \"{h}\": the op's source must be "
                    "self-contained; paste that header's code into the kernel file, or include "
                    "it as <...> from an include directory your CMake target adds")
            if h not in found:
                found.append(h)
        first = ["torchclad/runtime.h", *_PRE_INCLUDES]
        return first + [h for h in found if h not in first]

    def translate(self) -> dict:
        """Every spec expression in C++ (sizes in order, each seeing only the sizes before it)."""
        tr = Translator(self.name, self.inputs)
        sizes: list[tuple[str, str, CppExpr]] = []
        for n, e in self.spec.sizes.items():
            p = self.by_name[n]
            kind = "float" if self.is_float(p) else ("bool" if p.base == "bool" else "int")
            sizes.append((n, kind, tr.expr(e, f"sizes[{n!r}]", kind)))
            tr.sizes[n] = kind
        checks = [(c, tr.expr(c, f"checks[{i}]", "bool")) for i, c in enumerate(self.spec.checks)]
        indices = [(n, e, tr.expr(e, f"indices[{n!r}]", "int"))
                   for n, e in self.spec.indices.items()]
        shapes = [(n, self.spec.outputs[n],
                   None if n in self.inputs else tr.shape(self.spec.outputs[n], f"outputs[{n!r}]"))
                  for n in self.outputs]
        return {"sizes": sizes, "checks": checks, "indices": indices, "shapes": shapes,
                "dims": dict(tr.dims)}
