"""C entry points of a JIT-compiled kernel (no pybind11, no Python headers, no torch headers).

A user kernel is compiled as plain C++ into one shared library per scalar type (``float`` and
``double`` for a template; the declared floating type otherwise). After the translation unit
(runtime include, user source, generated derivatives) :func:`entry_points` appends, for every
binding of :func:`torchclad.toolchain.glue.calls`, one ``extern "C"`` function of the uniform
signature of ``csrc/runtime/torchclad/capi.h``::

    int torchclad_<binding>(const torchclad_arg* args, void* tape, torchclad_arg* ret)

named by :func:`entry_symbol` (``torchclad_mul_tanh_reverse_forw_f32``). ``args`` follows the
binding's slots (parameters, the seed, the adjoints; the tape is the separate ``tape``
argument): :func:`arg_codes` says how each one travels -- ``p`` pointer / adjoint address in
``.p``, ``i`` integer or bool in ``.i``, ``d`` floating value in ``.d``. The library also
exports ``torchclad_tape_new`` / ``_free`` / ``_bytes`` / ``_empty``, ``torchclad_last_error``
and ``torchclad_last_fault`` (capi.h).

The primal's entry point comes first, so that a template that does not compile for one scalar
type fails on the user's own code (the primal's instantiation) before any generated function's.
"""

from __future__ import annotations

from typing import Any

from .glue import Call, calls

__all__ = ["entry_symbol", "entry_points", "arg_codes", "SYMBOL_PREFIX", "TAPE_NEW", "TAPE_FREE",
           "TAPE_BYTES", "TAPE_EMPTY", "LAST_ERROR", "LAST_FAULT", "INCLUDE"]

SYMBOL_PREFIX = "torchclad_"
TAPE_NEW = "torchclad_tape_new"
TAPE_FREE = "torchclad_tape_free"
TAPE_BYTES = "torchclad_tape_bytes"
TAPE_EMPTY = "torchclad_tape_empty"
LAST_ERROR = "torchclad_last_error"
LAST_FAULT = "torchclad_last_fault"
#: the runtime header the entry points need
INCLUDE = "torchclad/capi.h"

def entry_symbol(binding: str) -> str:
    """The exported C symbol of a binding (``glue.binding_name``): ``torchclad_<binding>``."""
    return SYMBOL_PREFIX + binding


def _code_of_type(ctype: str) -> str:
    """``d`` for a floating C++ scalar type, else ``i``."""
    base = ctype.replace("const ", "").strip()
    return "d" if base in ("float", "double", "long double") else "i"


def _code(slot: Any) -> str:
    return "p" if slot.role in ("pointer", "adjoint") else _code_of_type(slot.ctype)


def arg_codes(call: Call) -> str:
    """How each argument of ``call`` travels in ``torchclad_arg`` (one letter per slot, the
    tape left out): ``p`` (``.p``), ``i`` (``.i``) or ``d`` (``.d``)."""
    return "".join(_code(s) for s in call.slots if s.role != "tape")


def _use(slot: Any, k: int) -> str:
    """The C++ expression for argument ``k`` (``args[k]``) of ``slot``'s type."""
    if slot.role == "tape":
        return "*static_cast<torchclad::Tape*>(tape)"
    code = _code(slot)
    if code == "p":
        return f"static_cast<{slot.ctype}>(args[{k}].p)"
    if slot.ctype.strip() == "bool":
        return f"(args[{k}].i != 0)"
    return f"static_cast<{slot.ctype}>(args[{k}].{code})"


def _entry(call: Call, namespace: str = "") -> str:
    uses, locals_, k = [], [], 0
    for s in call.slots:
        use = _use(s, k)
        if s.role in ("scalar", "seed"):
            # a local: a reference parameter (`double& y`) binds to it; by-value ones copy it
            locals_.append(f"{s.ctype.replace('const ', '')} v{k} = {use}; ")
            use = f"v{k}"
        uses.append(use)
        if s.role != "tape":
            k += 1
    invoke = f"{namespace + '::' if namespace else ''}{call.callee}({', '.join(uses)})"
    if call.result == "void":
        body = f"{invoke};"
    else:
        field = "d" if _code_of_type(call.result) == "d" else "i"
        cast = "double" if field == "d" else "long long"
        body = f"ret->{field} = static_cast<{cast}>({invoke});"
    return (
        f"TORCHCLAD_EXPORT int {entry_symbol(call.binding)}(const torchclad_arg* args, "
        "void* tape, torchclad_arg* ret) {\n"
        f"  (void)args; (void)tape; (void)ret;\n"
        f"  return torchclad::capi::call([&] {{ {''.join(locals_)}{body} }});\n"
        "}\n"
    )


def entry_points(derivative: Any, scalar: str, namespace: str = "") -> str:
    """The C entry points of ``derivative``'s bindings for ``scalar`` (text appended to its
    translation unit; the unit must include ``<torchclad/capi.h>``, see :data:`INCLUDE`).
    ``namespace``: where the unit's functions live (the built-in kernels' units each have one)."""
    return (
        f"\n// ---- C entry points for {scalar} (torchclad.toolchain.capi) ----\n"
        + "".join(_entry(c, namespace) for c in calls(derivative, scalar))
    )
