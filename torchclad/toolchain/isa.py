"""CPU-specific builds of the built-in kernels, and vector math for them (AOT only).

The package's flags never say ``-march=native`` (compiler.py): an install must run on any x86-64.
The built-in kernels are elementwise and row loops whose speed is the vector width and vector
``exp``/``tanh``, so ``setup.py`` builds them more than once:

- ``torchclad._C``          baseline flags (SSE2 on x86-64): always built, runs anywhere;
- ``torchclad._C_avx2``     ``+ -mavx2 -mfma``;
- ``torchclad._C_avx512``   ``+ -mavx512f -mavx512bw -mavx512dq -mavx512vl`` (and AVX2),

the same generated units each time, each a separate shared library (no symbol of one build can
leak into another; the CPU-specific ones with C entry points instead of pybind11 glue, see
``aot.py``), and :func:`select` picks at import the best one the CPU runs -- by
PyTorch's own CPU capability (``torch.backends.cpu.get_cpu_capability()``, which honours
``ATEN_CPU_CAPABILITY``), capped by ``$TORCHCLAD_CPU_CAPABILITY`` (``default`` / ``avx2`` /
``avx512``). ``$TORCHCLAD_ISA_VARIANTS`` (comma list, default ``avx2,avx512``; empty: none) says
which extra modules the build makes, e.g. for a quicker developer build.

Vector math: glibc's libmvec has SIMD versions of ``exp``, ``log``, ``tanh``, ``erf`` (float and
double, every ISA above; ``tanh``/``erf`` since glibc 2.35), but ``<math.h>`` declares them only
under ``-ffast-math``, which torchclad never uses. The built-in kernels' units are compiled with
:func:`vecmath_header` force-included (``-include``): the same declarations, ``simd("notinbranch")``
on each function the probe found in libmvec, plus ``-fno-math-errno`` (libm's errno is never
read; without it GCC keeps every call scalar) and ``-lmvec``. No reassociation: the kernels'
sums have a fixed number of lanes (csrc/kernels), so within one build a kernel does the same
float operations in the same order whatever the vector width. Across builds results may differ
in the last bits: the AVX2 / AVX-512 builds contract ``a * b + c`` into FMAs (GCC's default for
C++, as in PyTorch's own CPU kernels), and libmvec's ``exp``/``tanh`` differ from libm's by up to
a few ulp (its documented bound is 4).

One more flag for the built-in kernels, :data:`KERNEL_CFLAGS`: GCC vectorises a loop whose
pointers might overlap behind a run-time overlap check, but gives up past 10 pointer pairs
(``vect-max-version-for-alias-checks``) and runs the loop scalar. A generated reverse sweep
reads and writes many arrays (primal inputs, their adjoints, weights, outputs): layernorm's main
reverse loop has more pairs than that (0.33 ms scalar, 0.09 ms vectorised at B4,T64,C768).
The limit is raised.

User kernels (``torchclad.function`` / ``gradient``, :mod:`torchclad.toolchain.jit`) get the same:
one build for the variant :func:`select` picks on the running CPU (the cache key names it), the
vector math declarations -- of every one-result function libmvec has (:data:`VECMATH_USER`:
``erfc``, ``pow``, ``sin``, ``log1p``, ...), not only the built-ins' four -- and the alias-check
limit, when the compiler offers them (:mod:`torchclad.toolchain.probe`).
"""

from __future__ import annotations

import os
import platform
import subprocess
import tempfile
from pathlib import Path
from typing import Sequence

__all__ = ["VARIANTS", "requested_variants", "supported", "accepted", "vecmath_functions",
           "vecmath_available", "vecmath_all_available", "VECMATH_PAIRS", "VECMATH_USER",
           "vecmath_prelude",
           "vecmath_header", "VECMATH_CFLAGS", "VECMATH_LIBS", "KERNEL_CFLAGS", "module_names",
           "select"]

# name -> extra compiler flags; module torchclad._C_<name>
VARIANTS: dict[str, tuple[str, ...]] = {
    "avx2": ("-mavx2", "-mfma"),
    "avx512": ("-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-mavx2", "-mfma"),
}
# order of preference at import, best first, and the capability each needs (torch's spelling)
_NEEDS = {"avx512": "AVX512", "avx2": "AVX2"}
_RANK = {"default": 0, "avx2": 1, "avx512": 2}

VECMATH_CFLAGS: tuple[str, ...] = ("-fno-math-errno",)
KERNEL_CFLAGS: tuple[str, ...] = ("--param=vect-max-version-for-alias-checks=100",)
VECMATH_LIBS: tuple[str, ...] = ("mvec",)
# libm functions the built-in kernels call, with their C names (double, float)
VECMATH_PAIRS = (("exp", "expf"), ("log", "logf"), ("tanh", "tanhf"), ("erf", "erff"))
_VECMATH = VECMATH_PAIRS
# what user kernels may call: every one-result function of glibc's libmvec (2.35+; older
# glibcs have fewer, and the probe keeps those that link)
VECMATH_USER = VECMATH_PAIRS + tuple((f, f + "f") for f in (
    "erfc", "expm1", "exp2", "exp10", "log1p", "log2", "log10", "sin", "cos", "tan", "sinh",
    "cosh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "cbrt", "pow", "atan2", "hypot"))
_BINARY = frozenset(("pow", "atan2", "hypot"))
_DOUBLES = frozenset(d for d, _ in VECMATH_USER)


def _signature(fn: str) -> tuple[str, int]:
    """(C type, number of arguments) of libm function ``fn`` (``expf``: float, 1)."""
    base = fn[:-1] if fn.endswith("f") and fn[:-1] in _DOUBLES else fn
    return ("float" if base != fn else "double"), (2 if base in _BINARY else 1)


def _x86_64() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def requested_variants() -> list[str]:
    """The CPU-specific modules the build should make ($TORCHCLAD_ISA_VARIANTS; x86-64 only)."""
    if not _x86_64():
        return []
    raw = os.environ.get("TORCHCLAD_ISA_VARIANTS", "avx2,avx512")
    out = []
    for name in (n.strip().lower() for n in raw.split(",")):
        if not name:
            continue
        if name not in VARIANTS:
            raise ValueError(f"TORCHCLAD_ISA_VARIANTS: unknown variant {name!r} "
                             f"(known: {', '.join(VARIANTS)})")
        if name not in out:
            out.append(name)
    return out


def _links(cxx: Sequence[str], source: str, flags: Sequence[str], libs: Sequence[str] = ()
           ) -> bool:
    """Whether ``source`` compiles and links with ``flags`` and ``libs`` (a probe program)."""
    with tempfile.TemporaryDirectory(prefix="torchclad_probe_") as tmp:
        src = Path(tmp) / "probe.cpp"
        src.write_text(source)
        argv = [*cxx, "-O3", "-std=c++17", "-fopenmp", *flags, str(src), "-o",
                str(Path(tmp) / "probe"), *(f"-l{lib}" for lib in libs)]
        try:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
        except (OSError, subprocess.SubprocessError):
            return False
        return r.returncode == 0


def accepted(cxx: Sequence[str], flags: Sequence[str]) -> bool:
    """Whether the compiler accepts ``flags`` (without a warning about them)."""
    return _links(cxx, "int main() { return 0; }\n", [*flags, "-Werror"])


def supported(cxx: Sequence[str], variant: str) -> bool:
    """Whether the compiler accepts ``variant``'s flags."""
    return accepted(cxx, VARIANTS[variant])


def _decl(fns: Sequence[str]) -> str:
    lines = []
    for f in fns:
        t, n = _signature(f)
        lines.append(f"TORCHCLAD_VECMATH_SIMD {t} {f}({', '.join([t] * n)}) noexcept;")
    return "\n".join(lines)


def _probe_source(fns: Sequence[str]) -> str:
    """A program whose loops call the vector version of each function of ``fns``."""
    loops = []
    for k, fn in enumerate(fns):
        t, n = _signature(fn)
        args = ", ".join(["a[i]"] * n)
        loops.append(f"{t} a{k}[1024], b{k}[1024];\n"
                     f"__attribute__((noinline)) void run{k}() {{ {t}* a = a{k}; "
                     f"for (int i = 0; i < 1024; i++) b{k}[i] = {fn}({args}); }}\n")
    calls = " ".join(f"run{k}();" for k in range(len(fns)))
    return (
        "#define TORCHCLAD_VECMATH_SIMD __attribute__((__simd__(\"notinbranch\")))\n"
        f'extern "C" {{\n{_decl(fns)}\n}}\n'
        "#include <cmath>\n" + "".join(loops)
        + f"int main() {{ {calls} return b0[0] != b0[0]; }}\n"
    )


def vecmath_available(cxx: Sequence[str], fn: str) -> bool:
    """Whether the libmvec version of libm function ``fn`` links with this compiler + C library
    (never without libmvec: musl, macOS, non-x86)."""
    # the SSE variant is what the baseline build calls; the ISA variants add AVX2 / AVX-512
    return _x86_64() and _links(cxx, _probe_source([fn]), VECMATH_CFLAGS, VECMATH_LIBS)


def vecmath_all_available(cxx: Sequence[str], fns: Sequence[str]) -> bool:
    """Whether the libmvec versions of all of ``fns`` link (one probe program)."""
    return _x86_64() and _links(cxx, _probe_source(fns), VECMATH_CFLAGS, VECMATH_LIBS)


def vecmath_functions(cxx: Sequence[str]) -> list[str]:
    """The libm functions whose libmvec versions this compiler + C library can link (empty when
    there is no libmvec, e.g. musl, macOS, non-x86)."""
    if not _x86_64():
        return []
    return [fn for dbl, flt in _VECMATH for fn in (flt, dbl) if vecmath_available(cxx, fn)]


def vecmath_header(functions: Sequence[str]) -> str:
    """The header force-included into the built-in kernels' units (see the module docstring)."""
    return (
        "// Generated by torchclad.toolchain.isa (setup.py): SIMD declarations of the libm functions\n"
        "// below, whose vector versions glibc's libmvec provides (linked with -lmvec). <math.h>\n"
        "// declares them only under -ffast-math; torchclad never uses it. Force-included into the\n"
        "// built-in kernels' units only, compiled with -fno-math-errno.\n"
        "#pragma once\n"
        "#define TORCHCLAD_VECMATH_SIMD __attribute__((__simd__(\"notinbranch\")))\n"
        'extern "C" {\n'
        f"{_decl(functions)}\n"
        "}\n"
    )


def vecmath_prelude(functions: Sequence[str]) -> str:
    """The same declarations as the first lines of a user kernel's translation unit
    (:mod:`torchclad.toolchain.jit`); empty without libmvec."""
    if not functions:
        return ""
    return (
        "// SIMD declarations of libm functions with libmvec versions (torchclad.toolchain.isa)\n"
        "#define TORCHCLAD_VECMATH_SIMD __attribute__((__simd__(\"notinbranch\")))\n"
        f'extern "C" {{\n{_decl(functions)}\n}}\n'
    )


def module_names(variants: Sequence[str]) -> list[str]:
    """Extension module names (without the package), baseline first."""
    return ["_C", *(f"_C_{v}" for v in variants)]


def select(available: Sequence[str]) -> list[str]:
    """Variant names to try at import, best first (``"default"`` = the baseline ``_C``).

    ``available``: the variants built (``_C.__torchclad_isa_variants__``). The CPU's capability
    comes from torch (``get_cpu_capability``); ``$TORCHCLAD_CPU_CAPABILITY`` can only lower it.
    """
    try:
        import torch

        cap = str(torch.backends.cpu.get_cpu_capability()).upper()
    except Exception:  # noqa: BLE001 - no torch capability query: baseline only
        cap = "DEFAULT"
    have = {"AVX512": 2, "AVX2": 1}.get(cap, 0)
    cap_env = os.environ.get("TORCHCLAD_CPU_CAPABILITY", "").strip().lower()
    if cap_env:
        if cap_env not in _RANK:
            raise ValueError(f"TORCHCLAD_CPU_CAPABILITY={cap_env!r}: expected one of "
                             f"{', '.join(_RANK)}")
        have = min(have, _RANK[cap_env])
    out = [v for v in sorted(available, key=lambda v: -_RANK.get(v, -1))
           if v in _RANK and 0 < _RANK[v] <= have]
    return [*out, "default"]
