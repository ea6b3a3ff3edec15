"""Literals as the lowering reads them: a token's spelling, or clang's constant evaluation
for a literal spelled through a macro and for constant integer expressions."""
from __future__ import annotations

import ctypes
import re

import clang.cindex as ci

from ..errors import DiffError
from .scope import TK


# ---------------------------------------------------------------------- literals
def tok_text(c) -> str:
    toks = [t.spelling for t in c.get_tokens()]
    return toks[0] if len(toks) == 1 else "".join(toks)


_NUMBER = re.compile(r"^(0[xX][0-9a-fA-F.pP+-]+|[0-9.]+([eE][+-]?[0-9]+)?)[fFlLuU]*$")


def literal(c, floating: bool) -> str:
    """A literal's spelling. Under a macro expansion (M_PI, a #define'd constant) the
    cursor's tokens are not the literal, so the value is evaluated and spelled instead."""
    toks = [t.spelling for t in c.get_tokens()]
    if len(toks) == 1 and _NUMBER.match(toks[0]):
        return toks[0]
    lib = _eval_lib()
    res = lib.clang_Cursor_Evaluate(c)
    if not res:
        raise DiffError(None, "cannot read the value of a literal from a macro expansion")
    try:
        if floating:
            v = lib.clang_EvalResult_getAsDouble(res)
            text = repr(float(v))
            if "e" not in text and "." not in text and "inf" not in text and "nan" not in text:
                text += ".0"
            return text + ("f" if c.type.kind == TK.FLOAT else "")
        return str(lib.clang_EvalResult_getAsLongLong(res))
    finally:
        lib.clang_EvalResult_dispose(res)


def evaluate(c, floating: bool) -> "float | int | None":
    """clang's value of a constant expression (as a float or an int), None without one."""
    lib = _eval_lib()
    res = lib.clang_Cursor_Evaluate(c)
    if not res:
        return None
    try:
        return float(lib.clang_EvalResult_getAsDouble(res)) if floating else \
            int(lib.clang_EvalResult_getAsLongLong(res))
    finally:
        lib.clang_EvalResult_dispose(res)


def evaluate_int(c) -> "int | None":
    """clang's value of a constant integer expression, None when it has none."""
    return evaluate(c, False)


def _eval_lib():
    """libclang's evaluation API with explicit ctypes signatures (the bindings leave the
    result as int, which truncates the pointer)."""
    lib = ci.conf.lib
    if not getattr(lib, "_torchclad_eval_ready", False):
        lib.clang_Cursor_Evaluate.argtypes = [ci.Cursor]
        lib.clang_Cursor_Evaluate.restype = ctypes.c_void_p
        lib.clang_EvalResult_getAsDouble.argtypes = [ctypes.c_void_p]
        lib.clang_EvalResult_getAsDouble.restype = ctypes.c_double
        lib.clang_EvalResult_getAsLongLong.argtypes = [ctypes.c_void_p]
        lib.clang_EvalResult_getAsLongLong.restype = ctypes.c_longlong
        lib.clang_EvalResult_dispose.argtypes = [ctypes.c_void_p]
        lib.clang_EvalResult_dispose.restype = None
        lib._torchclad_eval_ready = True
    return lib
