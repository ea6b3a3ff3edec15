"""Acceptance corpus of the AD engine: one `Case` per kernel run (metadata only; no logic).

Each case names a kernel file under `kernels/`, the function to differentiate, `wrt`, how to make
every parameter's value, which parameters the kernel writes (`outputs`: floating ones are seeded
with random output adjoints, int ones are only allowed to change), tolerances, tags naming the
constructs it covers and, where finite differences cannot judge (kinks, NaN guards, custom
pullbacks that are deliberately scaled), the EXACT expected gradient.

`expected(v)` receives a dict: every parameter by name (scalars as Python numbers, arrays as
float64/int numpy arrays as generated), `v["_seed"][out]` (the output adjoint seeds) and
`v["_dy"]` (the seed of the return value). It returns `{wrt name: gradient}` — for a non-void kernel
the gradient of the result itself (seed 1; the harness scales it by dy) — and for an aliased
pair (`Alias`) the gradient of the shared buffer is the sum of both adjoints and is reported
under the buffer's owner. Conventions are PyTorch's: max/min ties split evenly, abs'(0) = 0,
relu'(0) = 0, leaky_relu'(0) = negative slope.

Random values come from a generator seeded by the case name, so every run sees the same inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


# ---- how to make one parameter's value -------------------------------------------------------

@dataclass(frozen=True)
class Scalar:
    """A floating scalar: `value`, or uniform in [lo, hi]."""
    lo: float = -1.0
    hi: float = 1.0
    value: float | None = None


@dataclass(frozen=True)
class Array:
    """A floating array: `values`, or n values uniform in [lo, hi]."""
    n: int = 0
    lo: float = -1.0
    hi: float = 1.0
    values: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Int:
    """An int-like scalar (int, long, size_t, unsigned, bool)."""
    value: int


@dataclass(frozen=True)
class IntArray:
    values: tuple[int, ...]


@dataclass(frozen=True)
class Null:
    """A null pointer (its adjoint is passed as null too)."""


@dataclass(frozen=True)
class Alias:
    """The same buffer as parameter `of` (its adjoint gets a buffer of its own)."""
    of: str


def s(lo: float = -1.0, hi: float = 1.0) -> Scalar:
    return Scalar(lo, hi)


def sv(value: float) -> Scalar:
    return Scalar(value=value)


def a(n: int, lo: float = -1.0, hi: float = 1.0) -> Array:
    return Array(n, lo, hi)


def av(*values: float) -> Array:
    return Array(len(values), values=tuple(values))


def i(value: int) -> Int:
    return Int(int(value))


def ia(*values: int) -> IntArray:
    return IntArray(tuple(int(x) for x in values))


NULL = Null()

FLOAT_TOL = dict(rtol=2e-2, atol=2e-3, fd_h=1e-3)  # float32 kernels: float FD is coarse


@dataclass(frozen=True)
class Case:
    name: str
    file: str                       # under tests/corpus/kernels/
    fn: str
    inputs: dict[str, Any]          # every parameter -> Scalar | Array | Int | IntArray | Null | Alias
    wrt: Any = None                 # None, Clad string ("x, y" / "0, 2") or list of names
    outputs: tuple[str, ...] = ()   # parameters the kernel writes
    tags: tuple[str, ...] = ()
    expected: Callable[[dict], dict] | None = None   # exact gradient; replaces FD when given
    fd_agrees: bool = True          # expected is also a smooth gradient FD must reproduce
    scalar: str = "double"          # instantiation of the template parameter
    dy: float = 1.25                # seed of the return value
    rtol: float = 1e-5
    atol: float = 1e-7
    fd_h: float = 1e-6              # relative FD step
    note: str = ""

    @property
    def build_key(self) -> tuple:
        """Cases that differ only in inputs share one generated derivative and one build."""
        wrt = tuple(self.wrt) if isinstance(self.wrt, list) else self.wrt
        return (self.file, self.fn, wrt, self.scalar)


def _c(name, file, fn, inputs, **kw) -> Case:
    kw["tags"] = tuple(kw.get("tags", ()))
    kw["outputs"] = tuple(kw.get("outputs", ()))
    return Case(name, file, fn, dict(inputs), **kw)


# ---- shapes of the llm.c-style layers ---------------------------------------------------------
B, T, C, NH, V = 2, 3, 4, 2, 5
BT, BTC = B * T, B * T * C


def _softplus(x):
    return np.log1p(np.exp(x))


def _unsigned_step_grad(x):
    """abp09_unsigned_step at n = 9: s = ((x2 + 1) x5 + 1) x8 + 1 over i = 2, 5, 8 and
    p = x0^2 / 4 + x4^2 / 2 + x8^2 over i = 0, 4, 8."""
    g = np.zeros(9)
    g[2], g[5], g[8] = x[5] * x[8], (x[2] + 1) * x[8], (x[2] + 1) * x[5] + 1
    g[0], g[4] = 0.5 * x[0], x[4]
    g[8] += 2 * x[8]
    return g


CASES: list[Case] = [
    # ---- scalars, locals, operators ----------------------------------------------------------
    _c("poly_scalar", "poly_scalar.cpp", "poly_scalar", {"x": s(0.5, 2), "y": s(0.5, 2)},
       wrt="x, y", tags=["double scalar", "return double", "* / + -", "wrt string"],
       expected=lambda v: {"x": 6 * v["x"] * v["y"] - 1 / v["y"], "y": 3 * v["x"] ** 2 + v["x"] / v["y"] ** 2}),
    _c("locals_assign", "locals_assign.cpp", "locals_assign", {"x": s(), "y": s()},
       tags=["locals", "assignment", "overwrite", "uninitialised declaration"]),
    _c("compound_assign", "compound_assign.cpp", "compound_assign", {"x": s(0.2, 1.5), "y": s(0.2, 1.5)},
       tags=["+=", "-=", "*=", "/=", "self-multiplication"]),
    _c("incdec", "incdec.cpp", "incdec", {"x": s(), "y": s()},
       tags=["++", "--", "post-increment value", "int counter"],
       expected=lambda v: {"x": 6 * v["x"] + 6 + v["y"], "y": 2 * v["y"] + 1 + v["x"]}),
    _c("comma_ternary", "comma_ternary.cpp", "comma_ternary", {"x": s(0.6, 1.4), "y": s(1.5, 2.5)},
       tags=["comma operator", "comma in for", "ternary", "nested ternary", "multiple declarators", "&&"]),
    _c("cast_int_float", "cast_int_float.cpp", "cast_int_float", {"x": s(0.4, 0.6), "y": s(2.2, 2.8), "k": i(5)},
       tags=["cast double->int", "cast int->double", "static_cast", "long", "unsigned", "int division"],
       expected=lambda v: {"x": 1 + 2 * v["y"] + 2, "y": 5 + 2 * v["x"]}),
    _c("float_scalar", "float_scalar.cpp", "float_scalar", {"x": s(0.5, 1.5), "y": s(0.5, 1.5)},
       tags=["float scalar", "return float", "f-suffixed math", "cast float<->double"], **FLOAT_TOL),
    _c("mixed_precision", "mixed_precision.cpp", "mixed_precision",
       {"x": s(), "y": s(), "w": a(5), "n": i(5)},
       tags=["float scalar", "float pointer", "double", "mixed precision"], rtol=1e-3, atol=1e-4, fd_h=1e-4),
    _c("int_kinds", "int_kinds.cpp", "int_kinds",
       {"x": s(), "n": i(3), "m": i(-2), "k": i(4), "flip": i(True), "u": i(5)},
       tags=["int", "long", "size_t", "bool", "unsigned", "size_t loop"],
       expected=lambda v: {"x": -(30 - 4 * v["x"]) + 5}),
    _c("const_everywhere", "const_everywhere.cpp", "const_everywhere",
       {"x": s(), "p": a(5), "q": a(5), "n": i(5)},
       tags=["const scalar", "const pointee", "const pointer", "east const", "const locals"]),
    _c("array_params", "array_params.cpp", "array_params", {"x": a(4), "w": a(4), "scale": ia(2, -3)},
       tags=["array parameter", "int array", "non-const input pointer"]),
    _c("int_array_gather", "int_array_gather.cpp", "int_array_gather",
       {"table": a(6), "idx": ia(0, 2, 2, 3, 0, 2), "n": i(6), "out": a(4), "count": ia(0, 0, 0, 0)},
       outputs=["out", "count"], tags=["int pointer", "gather", "scatter +=", "int output", "x++ on int element"]),
    _c("float_array", "float_array.cpp", "float_array", {"x": a(5), "w": a(5), "y": a(5), "n": i(5)},
       outputs=["y"], tags=["float pointer", "void", "tanhf"], **FLOAT_TOL),
    _c("out_scalar_ptr", "out_scalar_ptr.cpp", "out_scalar_ptr", {"x": s(), "y": s(), "out": a(1)},
       outputs=["out"], tags=["void", "output through pointer", "*p +=", "p[0] *="]),
    _c("local_fixed_array", "local_fixed_array.cpp", "local_fixed_array", {"x": a(4)},
       tags=["local array", "brace init", "% index", "array element overwrite"]),
    _c("static_const_global", "static_const_global.cpp", "static_const_global", {"x": s()},
       tags=["static const global", "global array", "global trip count"],
       expected=lambda v: {"x": 1.5 * (-1.25 + 4 * v["x"] + 2.25 * v["x"] ** 2)}),
    # address_of_local.cpp re-points one pointer between two locals: rejected with a diagnostic
    # (tests/test_diagnostics.py); this case keeps its coverage with one pointer per object.
    _c("address_of_local_fixed", "address_of_local_fixed.cpp", "address_of_local_fixed",
       {"x": s(), "y": s()},
       tags=["address-of local", "address-of array element", "callee writes via pointer"],
       expected=lambda v: {
           "x": (1 + v["y"] + 2 * v["x"]) * v["x"] * v["y"] + (v["x"] + v["x"] * v["y"] + v["x"] ** 2) * v["y"],
           "y": v["x"] * v["x"] * v["y"] + (v["x"] + v["x"] * v["y"] + v["x"] ** 2) * v["x"]}),
    _c("pointer_arith_rows", "pointer_arith_rows.cpp", "pointer_arith_rows",
       {"out": a(BTC), "inp": a(BTC), "scale": a(C), "B": i(B), "T": i(T), "C": i(C)},
       wrt="out, inp", outputs=["out"], tags=["pointer arithmetic rows", "nested loops", "partial wrt"]),
    _c("pointer_walk", "pointer_walk.cpp", "pointer_walk", {"x": a(6), "n": i(6), "w": s()},
       tags=["pointer ++", "*p++", "p != end", "x + k pointer", "while"]),
    # ---- control flow ----------------------------------------------------------------------------
    _c("for_complex_cond", "for_complex_cond.cpp", "for_complex_cond",
       {"x": av(0.9, 0.7, 0.2, 0.25, 0.8, 1.1), "n": i(6), "lo": sv(0.5)},
       tags=["for", "data-dependent trip count", "&& ||", "counter used after loop"]),
    _c("while_loop", "while_loop.cpp", "while_loop", {"x": a(5), "n": i(5), "a": s(0.5, 1.5)},
       tags=["while", "compound condition", "i += 2", "i--"]),
    _c("do_while", "do_while.cpp", "do_while", {"x": sv(1.3), "y": sv(2.0), "n": i(4)},
       tags=["do-while", "data-dependent trip count", "pow(x, int)", "fabs"]),
    _c("if_else_chain", "if_else_chain.cpp", "if_else_chain",
       {"x": av(-0.8, -0.3, 0.2, 0.7, -0.6, 0.45, 0.9), "n": i(7)},
       tags=["if", "else if", "else", "unbraced branch", "condition on accumulated value"]),
    _c("switch_basic", "switch_basic.cpp", "switch_basic",
       {"x": a(8, 0.5, 1.5), "op": ia(0, 1, 2, 3, 4, 7, 1, 0), "n": i(8)},
       tags=["switch", "break", "fall-through", "default", "int array"]),
    _c("break_continue", "break_continue.cpp", "break_continue",
       {"x": av(0.5, -0.3, 0.8, 1.1, -2.0, 0.9, 1.5, 0.4), "n": i(8), "cap": sv(2.0)},
       tags=["break", "continue", "data-dependent exit"]),
    _c("early_return_loop_inside", "early_return_loop.cpp", "early_return_loop",
       {"x": av(1.3, 1.5, 1.2, 1.6, 1.4), "n": i(5), "thresh": sv(3.0)},
       tags=["early return in loop", "return taken"]),
    _c("early_return_loop_after", "early_return_loop.cpp", "early_return_loop",
       {"x": av(1.3, 1.5, 1.2, 1.6, 1.4), "n": i(5), "thresh": sv(100.0)},
       tags=["early return in loop", "return not taken"]),
    _c("early_return_nested", "early_return_nested.cpp", "early_return_nested",
       {"A": av(0.5, 0.9, 0.3, 0.8, 0.6, 0.7, 0.4, 0.2, 0.95), "n": i(3), "lim": sv(1.4)},
       tags=["early return in nested loop", "nested loops"]),
    _c("nested_loops", "nested_loops.cpp", "nested_loops", {"A": a(12), "v": a(4), "n": i(3), "m": i(4)},
       wrt=["v"], tags=["nested loops", "wrt list", "partial wrt"],
       expected=lambda v: {"v": 2 * v["A"].reshape(3, 4).T @ (v["A"].reshape(3, 4) @ v["v"])}),
    _c("triangular_loops", "triangular_loops.cpp", "triangular_loops", {"x": a(5), "y": a(5), "n": i(5)},
       outputs=["y"], tags=["triangular loops", "j <= i", "output +="]),
    _c("shadowed_names", "shadowed_names.cpp", "shadowed_names", {"x": s(), "y": s()},
       tags=["shadowing", "block scope", "parameter overwritten"]),
    _c("loop_carried", "loop_carried.cpp", "loop_carried", {"x": a(5, 0.5, 1.2), "n": i(5)},
       tags=["loop-carried dependence", "overwrite"]),
    _c("inplace_update", "inplace_update.cpp", "inplace_update", {"x": a(5), "w": a(5), "n": i(5)},
       outputs=["x"], tags=["in/out buffer", "overwritten array values", "neighbour read", "reverse loop"]),
    _c("do_while_continue", "do_while_continue.cpp", "do_while_continue",
       {"x": av(0.5, -0.3, 2.2, 1.8, -1.0, 1.9, 0.7, 1.1), "n": i(8)},
       tags=["do-while", "continue in do-while", "break", "data-dependent exit"]),
    _c("switch_in_loop_continue", "switch_in_loop_continue.cpp", "switch_in_loop_continue",
       {"x": a(8), "kind": ia(0, 1, 2, 3, 0, 2, 1, 0), "n": i(8)},
       tags=["switch", "break leaves switch", "continue inside switch", "default: continue"]),
    _c("while_convergence", "while_convergence.cpp", "while_convergence", {"a": sv(0.8), "b": sv(0.3)},
       tags=["while", "convergence loop", "fabs in condition", "&& in condition", "iteration cap"]),
    _c("callee_early_return", "callee_early_return.cpp", "callee_early_return",
       {"x": av(0.3, -0.5, 1.1, 0.9, -1.4), "n": i(5), "t": sv(0.7)},
       tags=["callee early return in loop", "void callee return;", "callee writes local array", "call"]),
    _c("static_local_table", "static_local_table.cpp", "static_local_table", {"x": a(6), "n": i(6)},
       tags=["static const local array", "computed int index"]),
    _c("found_flag", "found_flag.cpp", "found_flag",
       {"x": av(0.2, 0.4, 0.9, 0.1, 1.3, 0.6), "n": i(6), "t": sv(0.5)},
       tags=["bool local", "!flag && cond", "ternary on bool"]),
    _c("post_decrement_count", "post_decrement_count.cpp", "post_decrement_count",
       {"x": a(5), "n": i(5), "a": s(0.5, 1.2)},
       tags=["while (n-- > 0)", "int parameter modified", "post-decrement in condition"],
       expected=lambda v: {"x": 2 * v["x"] * v["a"] ** np.arange(5),
                           "a": float(np.sum(v["x"] ** 2 * np.arange(5) * v["a"] ** (np.arange(5) - 1.0)))}),
    _c("long_loop_tape", "long_loop_tape.cpp", "long_loop_tape", {"x": a(4), "n": i(4), "a": sv(0.9)},
       tags=["200000 iterations", "tape spans many slabs", "overwritten scalar"]),
    _c("loop_step_param", "loop_step_param.cpp", "loop_step_param", {"x": a(7), "n": i(7), "step": i(2)},
       tags=["i += step", "i -= 3"]),
    _c("output_overwritten_twice", "output_overwritten_twice.cpp", "output_overwritten_twice",
       {"x": a(5), "y": a(5), "z": a(1), "n": i(5)}, outputs=["y", "z"],
       tags=["output overwritten after a non-linear read", "two outputs"]),
    _c("local_array_reread", "local_array_reread.cpp", "local_array_reread", {"x": a(4)},
       tags=["local array overwritten in place", "overwritten array values", "element overwrite"]),
    _c("for_ever_break", "for_ever_break.cpp", "for_ever_break", {"x": a(6, 0.1, 1.0), "n": i(6), "a": sv(0.8)},
       tags=["for (;;)", "while (true)", "break", "++i in condition"]),
    _c("expr_forms", "expr_forms.cpp", "expr_forms", {"x": s(0.5, 1.0), "y": s(-1.0, -0.5)},
       tags=["chained assignment", "call as call argument", "call in condition", "unary minus/plus"]),
    _c("nested_call_args", "nested_call_args.cpp", "nested_call_args", {"x": s(0.5, 1.0), "y": s(-1.0, -0.5)},
       tags=["call as call argument", "call in condition", "call in ternary"]),
    _c("call_in_condition", "call_in_condition.cpp", "call_in_condition", {"x": s(0.5, 1.0), "y": s(-1.0, -0.5)},
       tags=["call as call argument", "call in condition"],
       expected=lambda v: {
           "x": (v["x"] + 2 * v["y"]) ** 2 + 2 * (v["x"] + v["y"]) * (v["x"] + 2 * v["y"])
           + 2 * v["x"] * (v["y"] + v["x"] * v["y"]) + v["x"] ** 2 * v["y"],
           "y": (v["x"] + 2 * v["y"]) ** 2 + 4 * (v["x"] + v["y"]) * (v["x"] + 2 * v["y"])
           + v["x"] ** 2 * (1 + v["x"])}),
    # ---- math ---------------------------------------------------------------------------------
    _c("math_exp_log", "math_exp_log.cpp", "math_exp_log", {"x": s(0.5, 1.5), "y": s(0.5, 1.5)},
       tags=["std::exp", "std::log", "std::log1p", "std::sqrt"]),
    _c("math_pow", "math_pow.cpp", "math_pow", {"x": s(0.5, 1.5), "y": s(0.5, 1.5)},
       tags=["std::pow base", "std::pow exponent", "std::pow both", "pow(x, int)"]),
    _c("math_trig", "math_trig.cpp", "math_trig", {"x": s(0.3, 1.2), "y": s(0.3, 1.2)},
       wrt="0, 1", tags=["std::sin", "std::cos", "std::tan", "std::atan", "std::atan2", "wrt indices"]),
    _c("math_hyper", "math_hyper.cpp", "math_hyper", {"x": s(), "y": s()},
       tags=["std::tanh", "std::sinh", "std::cosh", "std::erf"]),
    _c("math_c_forms", "math_c_forms.cpp", "math_c_forms", {"x": s(0.4, 0.6), "y": s(1.2, 1.8)},
       tags=["C math", "exp", "log", "log1p", "sqrt", "pow", "sin", "cos", "tan", "tanh", "sinh", "cosh",
             "erf", "atan", "atan2", "fabs", "fmax", "fmin", "floor", "ceil"]),
    _c("math_f_suffixed", "math_f_suffixed.cpp", "math_f_suffixed", {"x": s(0.4, 0.6), "y": s(1.2, 1.8)},
       tags=["float math", "expf", "logf", "log1pf", "sqrtf", "powf", "sinf", "cosf", "tanf", "tanhf",
             "sinhf", "coshf", "erff", "atanf", "atan2f", "fabsf", "fmaxf", "fminf", "floorf", "ceilf"],
       **FLOAT_TOL),
    _c("math_abs_minmax", "math_abs_minmax.cpp", "math_abs_minmax",
       {"x": av(0.7, -0.4, 0.9, 0.35, -0.8, 0.6), "n": i(6)},
       tags=["std::fabs", "std::abs", "std::fmax", "std::fmin", "std::max", "std::min", "i + 1 < n"]),
    _c("math_floor_ceil", "math_floor_ceil.cpp", "math_floor_ceil",
       {"x": s(1.2, 1.8), "y": s(1.2, 1.8), "table": a(3)},
       tags=["std::floor", "std::ceil", "floor as index"],
       expected=lambda v: {"x": v["y"] + 2.0 + v["table"][1], "y": v["x"] - np.floor(v["x"]),
                           "table": np.array([0.0, v["x"], 0.0])}),
    _c("math_std_template", "math_std_template.cpp", "math_std_template", {"x": s(0.3, 1.2), "y": s(0.3, 1.2)},
       tags=["template", "std math in template", "T(1)"]),
    # ---- calls ---------------------------------------------------------------------------------
    _c("call_scalar_helper", "call_scalar_helper.cpp", "call_scalar_helper", {"x": s(), "y": s()},
       tags=["call", "static helper", "inline helper"],
       expected=lambda v: {"x": 2 * (v["x"] + v["y"]) + (3 * v["x"] ** 2 + v["y"]) * v["y"] ** 2,
                           "y": 2 * (v["x"] + v["y"]) + v["x"] * v["y"] ** 2
                           + (v["x"] ** 3 + v["y"] * v["x"]) * 2 * v["y"]}),
    _c("call_ptr_out", "call_ptr_out.cpp", "call_ptr_out", {"r": s(0.5, 1.5), "th": s(0.0, 1.5), "v": a(3)},
       tags=["callee writes through pointer", "address-of local", "callee += into local array"]),
    _c("call_array_rows", "call_array_rows.cpp", "call_array_rows",
       {"A": a(12), "x": a(4), "y": a(3), "rows": i(3), "cols": i(4)},
       wrt=["A", "y"], outputs=["y"], tags=["call with pointer into matrix", "callee returns value", "partial wrt"]),
    _c("call_chain", "call_chain.cpp", "call_chain", {"x": a(4), "n": i(4), "w": s(0.5, 1.0)},
       tags=["call chain", "call in loop", "helper used twice"]),
    _c("call_void_output", "call_void_output.cpp", "call_void_output", {"x": a(5), "y": a(5), "n": i(5)},
       outputs=["y"], tags=["void callee writes output", "output read back"]),
    _c("call_row_pointers", "call_row_pointers.cpp", "call_row_pointers",
       {"out": a(12), "inp": a(12), "w": a(4), "N": i(3), "C": i(4)}, outputs=["out"],
       tags=["callee with offset pointers", "callee writes output rows", "output read back"]),
    _c("reuse_buffer_calls", "reuse_buffer_calls.cpp", "reuse_buffer_calls",
       {"x": a(5, 0.3, 1.5), "w": a(5), "n": i(5)},
       tags=["local array reused by callees", "callee writes in place", "overwritten array values", "call"]),
    _c("callee_inout_twice", "callee_inout_twice.cpp", "callee_inout_twice", {"x": a(6), "n": i(6), "a": s(0.5, 1.0)},
       tags=["callee in/out array", "same array through three calls", "overwritten array values"]),
    _c("call_template_helper", "call_template_helper.cpp", "call_template_helper", {"x": s(), "y": s()},
       tags=["template callee", "explicit template argument"],
       expected=lambda v: {"x": 2 * v["y"] * v["x"] + 2 * v["y"] ** 2,
                           "y": v["x"] ** 2 + 4 * v["y"] * v["x"]}),
    _c("custom_pullback_scaled", "custom_pullback_scaled.cpp", "custom_pullback_scaled",
       {"x": sv(0.7), "y": sv(-1.3)}, fd_agrees=False,
       tags=["custom derivative", "custom pullback precedence"],
       note="custom pullback is 10x the true derivative on purpose",
       expected=lambda v: {"x": 20 * v["x"] * v["y"], "y": v["x"] ** 2 + 20 * v["y"]}),
    _c("custom_pullback_ptr", "custom_pullback_ptr.cpp", "custom_pullback_ptr",
       {"a": a(3), "b": a(3), "w": s()}, fd_agrees=False,
       tags=["custom derivative", "custom pullback with pointers"],
       note="custom pullback is 3x the true derivative on purpose",
       expected=lambda v: {"a": 3 * v["w"] * v["b"], "b": 3 * v["w"] * v["a"], "w": float(v["a"] @ v["b"])}),
    _c("custom_pullback_opaque", "custom_pullback_opaque.cpp", "custom_pullback_opaque",
       {"x": s(0.5, 1.5), "y": s(0.5, 1.5)},
       tags=["custom derivative", "callee body not differentiable (goto)"],
       expected=lambda v: {"x": 3 * v["x"] ** 2 * v["y"], "y": v["x"] ** 3 - 1.0}),
    _c("custom_pushforward_opaque", "custom_pushforward_opaque.cpp", "custom_pushforward_opaque",
       {"x": s(0.5, 1.5), "y": s(0.5, 1.5)},
       tags=["custom derivative", "custom pushforward", "callee body not differentiable (goto)"],
       expected=lambda v: {"x": 3 * v["x"] ** 2 * v["y"], "y": v["x"] ** 3 - 1.0}),
    _c("tmpl_scalar", "tmpl_scalar.cpp", "tmpl_scalar", {"x": s(), "y": s()},
       tags=["template", "T(0.5)"]),
    _c("tmpl_scalar_float", "tmpl_scalar.cpp", "tmpl_scalar", {"x": s(), "y": s()}, scalar="float",
       tags=["template", "float instantiation"], **FLOAT_TOL),
    _c("tmpl_axpby", "tmpl_axpby.cpp", "tmpl_axpby", {"x": a(5), "y": a(5), "a": s(), "b": s(), "n": i(5)},
       outputs=["y"], tags=["template", "in/out pointer", "void"],
       expected=lambda v: {"x": v["a"] * v["_seed"]["y"], "y": v["b"] * v["_seed"]["y"],
                           "a": float(v["x"] @ v["_seed"]["y"]), "b": float(v["y"] @ v["_seed"]["y"])}),
    # ---- AD-BUG-PATTERNS.md ------------------------------------------------------------------
    _c("abp01_overwrite_accum", "abp01_overwrite_accum.cpp", "abp01_overwrite_accum", {"a": s(0.3, 1.5), "n": i(6)},
       tags=["pattern 1", "overwritten value"],
       expected=lambda v: {"a": sum(-2 * v["a"] / (k + 1 + v["a"] ** 2) ** 2 for k in range(6))}),
    _c("abp01_square_twice", "abp01_square_twice.cpp", "abp01_square_twice", {"x": s(0.5, 1.5), "n": i(2)},
       tags=["pattern 1", "v *= v twice"], expected=lambda v: {"x": 2 * 4 * v["x"] ** 3}),
    _c("abp02_alias_local", "abp02_alias_local.cpp", "abp02_alias_local", {"x": s()},
       tags=["pattern 2", "alias of local"], expected=lambda v: {"x": 2 * v["x"]}),
    _c("abp02_same_buffer", "abp02_same_buffer.cpp", "abp02_same_buffer",
       {"a": a(5), "b": Alias("a"), "n": i(5)},
       tags=["pattern 2", "same buffer for two params"], expected=lambda v: {"a": 3 * v["a"] ** 2}),
    _c("abp03_early_return_taken", "abp03_early_return.cpp", "abp03_early_return", {"c": a(3), "n": i(3)},
       tags=["pattern 3", "early return before loop"],
       expected=lambda v: {"c": np.array([v["c"][1], v["c"][0], 1.0])}),
    _c("abp03_early_return_loop", "abp03_early_return.cpp", "abp03_early_return", {"c": a(5), "n": i(5)},
       tags=["pattern 3", "early return not taken"], expected=lambda v: {"c": 2 * v["c"]}),
    _c("abp03_break_negative", "abp03_break_negative.cpp", "abp03_break_negative",
       {"x": av(0.5, 1.2, 0.3, -0.4, 2.0, 0.7), "n": i(6)},
       tags=["pattern 3", "break on first negative"],
       expected=lambda v: {"x": np.where(np.arange(6) < 3, 3 * v["x"] ** 2, 0.0)}),
    _c("abp03_continue_accum", "abp03_continue_accum.cpp", "abp03_continue_accum",
       {"x": av(0.5, -1.2, 0.3, 0.8, -0.1, 1.4), "n": i(6), "w": sv(0.7)},
       tags=["pattern 3", "continue"],
       expected=lambda v: {"x": np.where(v["x"] >= 0, 2 * v["w"] * v["x"] + 1, 0.0),
                           "w": float(np.sum(np.where(v["x"] >= 0, v["x"] ** 2, 0.0)))}),
    _c("abp04_int_trunc", "abp04_int_trunc.cpp", "abp04_int_trunc", {"x": sv(2.7)},
       tags=["pattern 4", "implicit double->int"], expected=lambda v: {"x": 2.0}),
    _c("abp04_int_trunc_negative", "abp04_int_trunc.cpp", "abp04_int_trunc", {"x": sv(-1.6)},
       tags=["pattern 4", "truncation toward zero"], expected=lambda v: {"x": -1.0}),
    _c("abp05_max_tie", "abp05_max_tie.cpp", "abp05_max_tie", {"a": sv(1.5), "b": sv(1.5), "c": sv(1.5)},
       fd_agrees=False, tags=["pattern 5", "kink", "fmax tie", "fmin tie", "std::max tie"],
       expected=lambda v: {"a": 2.5, "b": 1.5, "c": 3.0}),
    _c("abp05_fabs_zero", "abp05_fabs_zero.cpp", "abp05_fabs_zero", {"x": av(0.0, -0.0, 1.5, -2.0), "n": i(4)},
       fd_agrees=False, tags=["pattern 5", "kink", "fabs(+0)", "fabs(-0)", "std::abs"],
       expected=lambda v: {"x": np.array([0.0, 0.0, 3.5, -3.5])}),
    _c("abp05_relu_zero", "abp05_relu_zero.cpp", "abp05_relu_zero",
       {"x": av(0.0, 0.7, -0.3, -0.0, 2.0), "y": a(5), "z": a(5), "n": i(5)},
       outputs=["y", "z"], fd_agrees=False, tags=["pattern 5", "kink", "relu(0)", "leaky relu(0)"],
       expected=lambda v: {"x": np.where(v["x"] > 0, v["_seed"]["y"] + v["_seed"]["z"], 0.1 * v["_seed"]["z"]),
                           "y": np.zeros(5), "z": np.zeros(5)}),
    _c("abp06_unused_nan", "abp06_unused_nan.cpp", "abp06_unused_nan", {"A": sv(1.0), "C": sv(2.0), "x": sv(0.3)},
       tags=["pattern 6", "unused NaN", "acos"],
       expected=lambda v: {"A": v["x"] ** 2, "C": v["x"], "x": 2 * v["A"] * v["x"] + v["C"]}),
    _c("abp06_guarded_log", "abp06_guarded_log.cpp", "abp06_guarded_log",
       {"x": av(1.5, 0.0, -2.0, 0.5, -0.0, 3.0), "n": i(6)}, fd_agrees=False,
       tags=["pattern 6", "guarded log", "guarded sqrt", "ternary"],
       expected=lambda v: {"x": np.where(v["x"] > 0, 1 / np.where(v["x"] > 0, v["x"], 1)
                                         + 0.5 / np.sqrt(np.where(v["x"] > 0, v["x"], 1)), 0.0)}),
    _c("abp07_loop_local_array", "abp07_loop_local_array.cpp", "abp07_loop_local_array", {"x": a(5), "n": i(5)},
       tags=["pattern 7", "array declared in loop", "brace init"],
       expected=lambda v: {"x": np.where(np.arange(5) % 2 == 0, 3 * v["x"] ** 2 + 1, 1.0)}),
    _c("abp07_nan_output_init", "abp07_nan_output_init.cpp", "abp07_nan_output_init",
       {"x": a(4), "y": av(*[float("nan")] * 4), "n": i(4)}, outputs=["y"], fd_agrees=False,
       tags=["pattern 7", "NaN in output buffer", "output read back"],
       expected=lambda v: {"x": v["_seed"]["y"] * (3 * v["x"] ** 2 + 1), "y": np.zeros(4)}),
    _c("abp08_shifted_ptr", "abp08_shifted_ptr.cpp", "abp08_shifted_ptr", {"x": a(6), "n": i(6)},
       tags=["pattern 8", "p = x + 1", "two pointers to one buffer"],
       expected=lambda v: {"x": np.concatenate([v["x"][1:], [0.0]]) + np.concatenate([[0.0], v["x"][:-1]])}),
    _c("abp08_rows_prev", "abp08_rows_prev.cpp", "abp08_rows_prev",
       {"out": a(BTC), "inp": a(BTC), "B": i(B), "T": i(T), "C": i(C)}, outputs=["out"],
       tags=["pattern 8", "row pointers", "(t-1) row", "continue"]),
    _c("abp08_null_n0", "abp08_null_empty.cpp", "abp08_null_empty", {"x": NULL, "w": NULL, "c": sv(0.8), "n": i(0)},
       tags=["pattern 8", "null pointers", "n == 0"], expected=lambda v: {"c": 2 * v["c"]}),
    _c("abp08_null_negative_n", "abp08_null_empty.cpp", "abp08_null_empty",
       {"x": NULL, "w": NULL, "c": sv(-0.6), "n": i(-3)},
       tags=["pattern 8", "null pointers", "n < 0"], expected=lambda v: {"c": 2 * v["c"]}),
    _c("abp08_null_void", "abp08_null_void.cpp", "abp08_null_void", {"x": NULL, "y": NULL, "n": i(0)},
       outputs=["y"], tags=["pattern 8", "null pointers", "void"], expected=lambda v: {}),
    _c("abp09_obs_tripcount", "abp09_obs_tripcount.cpp", "abp09_obs_tripcount",
       {"obs": av(3.4, 0.5, -0.2, 0.9, 1.3), "x": a(4), "a": s(0.5, 1.5)},
       tags=["pattern 9", "trip count from data", "(int) cast in condition"],
       expected=lambda v: {"obs": np.array([0.0, v["a"] ** 2, v["a"] ** 2, v["a"] ** 2, 0.0]),
                           "x": np.array([v["a"]] * 3 + [0.0]),
                           "a": float(np.sum(v["x"][:3]) + 2 * v["a"] * np.sum(v["obs"][1:4]))}),
    _c("abp09_double_loop_var", "abp09_double_loop_var.cpp", "abp09_double_loop_var",
       {"lo": sv(0.1), "hi": sv(1.05), "h": sv(0.2), "k": sv(1.3)},
       tags=["pattern 9", "double loop variable", "t += h"]),
    _c("abp09_while_diff_exit", "abp09_while_diff_exit.cpp", "abp09_while_diff_exit",
       {"x": sv(1.0), "r": sv(1.5), "limit": sv(10.0)},
       tags=["pattern 9", "while exit on differentiable value", "parameter overwritten in loop"]),
    _c("abp09_reverse_size_t", "abp09_reverse_size_t.cpp", "abp09_reverse_size_t", {"x": a(5), "n": i(5)},
       tags=["pattern 9", "for (size_t i = n; i-- > 0;)", "size_t"],
       expected=lambda v: {"x": 2 * v["x"] * 0.5 ** np.arange(5)}),
    _c("abp09_unsigned_step", "abp09_unsigned_step.cpp", "abp09_unsigned_step",
       {"x": a(9), "n": i(9)},
       tags=["pattern 9", "size_t / unsigned counters, step 3 from 2 and 4 from 0", "reverse"],
       expected=lambda v: {"x": _unsigned_step_grad(v["x"])}),
    _c("abp09_unsigned_unrolled", "abp09_unsigned_unrolled.cpp", "abp09_unsigned_unrolled",
       {"x": a(8), "n": i(8)}, tags=["pattern 9", "i + 2 < n with a size_t n", "unrolled"],
       # s = (x0 + x2) x3 + x5 over i = 0, 3
       expected=lambda v: {"x": np.array([v["x"][3], 0, v["x"][3], v["x"][0] + v["x"][2],
                                          0, 1, 0, 0])}),
    _c("abp09_unsigned_unrolled_short", "abp09_unsigned_unrolled.cpp", "abp09_unsigned_unrolled",
       {"x": a(2), "n": i(2)}, tags=["pattern 9", "i + 2 < n, n = 2: no iteration"],
       expected=lambda v: {"x": np.zeros(2)}),
    _c("abp10_shadow_t", "abp10_shadow_t.cpp", "abp10_shadow_t", {"x": s(), "y": s()},
       tags=["pattern 10", "shadowing"],
       expected=lambda v: {
           "x": (2 * (3 * v["x"] + 3)) * v["x"] * v["y"]
           + (sum((v["x"] + k) ** 2 for k in range(3)) + 2 * v["y"]) * v["y"],
           "y": 2 * v["x"] * v["y"] + (sum((v["x"] + k) ** 2 for k in range(3)) + 2 * v["y"]) * v["x"]}),
    _c("abp10_two_loops_i", "abp10_two_loops_i.cpp", "abp10_two_loops_i", {"x": a(5), "n": i(5)},
       tags=["pattern 10", "two loops named i", "reverse loop"]),
    _c("abp10_reserved_names", "abp10_reserved_names.cpp", "abp10_reserved_names", {"x": s(), "_t0": s()},
       tags=["pattern 10", "locals named _d_x _t0 _r_d0 _t1 _d_y", "parameter named _t0"]),
    _c("abp10_reserved_params", "abp10_reserved_params.cpp", "abp10_reserved_params",
       {"x": s(), "_d_y": s(), "_d_x": s()},
       tags=["pattern 10", "parameters named _d_y _d_x", "local named _d__d_y"],
       expected=lambda v: {"x": v["_d_y"], "_d_y": 2 * v["_d_y"] * v["_d_x"] + v["x"], "_d_x": v["_d_y"] ** 2}),
    *[_c(f"abp11_switch_return_mode{m}", "abp11_switch_return.cpp", "abp11_switch_return",
         {"x": s(0.5, 1.0), "y": s(0.5, 1.0), "mode": i(m)},
         tags=["pattern 11", "switch", "return in case"] + (["fall-through into return"] if m == 1 else []))
      for m in (0, 1, 2, 3, 7)],
    _c("abp11_switch_modes", "abp11_switch_modes.cpp", "abp11_switch_modes",
       {"x": a(10), "y": a(10), "n": i(10)},
       tags=["pattern 11", "switch with returns in callee", "call in loop"]),
    _c("abp11_attention_rows", "abp11_attention_rows.cpp", "abp11_attention_rows",
       {"q": a(12), "k": a(12), "v": a(12), "out": a(12), "L": i(4), "D": i(3)}, outputs=["out"],
       tags=["pattern 11", "local array reused across outer iterations", "softmax", "causal"]),
    # ---- llm.c-style layers -------------------------------------------------------------------------
    _c("llm_layernorm_d", "llm_layernorm_d.cpp", "layernorm_forward_d",
       {"out": a(BTC), "mean": a(BT), "rstd": a(BT), "inp": a(BTC), "gamma": a(C), "beta": a(C),
        "B": i(B), "T": i(T), "C": i(C)},
       outputs=["out", "mean", "rstd"], tags=["llm.c", "layernorm", "mean/rstd outputs", "double"]),
    _c("llm_layernorm_t", "llm_layernorm_t.cpp", "layernorm_forward_t",
       {"out": a(BTC), "mean": a(BT), "rstd": a(BT), "inp": a(BTC), "gamma": a(C), "beta": a(C),
        "B": i(B), "L": i(T), "C": i(C)},
       outputs=["out", "mean", "rstd"], tags=["llm.c", "layernorm", "template"]),
    _c("llm_layernorm_t_float", "llm_layernorm_t.cpp", "layernorm_forward_t",
       {"out": a(BTC), "mean": a(BT), "rstd": a(BT), "inp": a(BTC), "gamma": a(C), "beta": a(C),
        "B": i(B), "L": i(T), "C": i(C)},
       outputs=["out", "mean", "rstd"], scalar="float",
       tags=["llm.c", "layernorm", "template", "float instantiation", "float pointer arithmetic"], **FLOAT_TOL),
    _c("llm_softmax_d", "llm_softmax_d.cpp", "softmax_forward_d",
       {"probs": a(3 * V), "logits": a(3 * V, -2, 2), "N": i(3), "V": i(V)},
       outputs=["probs"], tags=["llm.c", "softmax", "max subtraction", "double"]),
    _c("llm_softmax_t", "llm_softmax_t.cpp", "softmax_forward_t",
       {"probs": a(3 * V), "logits": a(3 * V, -2, 2), "N": i(3), "V": i(V)},
       outputs=["probs"], tags=["llm.c", "softmax", "std::max", "template"]),
    _c("llm_attention_d", "llm_attention_d.cpp", "attention_forward_d",
       {"out": a(BTC), "preatt": a(B * NH * T * T), "att": a(B * NH * T * T), "inp": a(B * T * 3 * C),
        "B": i(B), "T": i(T), "C": i(C), "NH": i(NH)},
       outputs=["out", "preatt", "att"], tags=["llm.c", "causal attention", "double"]),
    _c("llm_attention_t", "llm_attention_t.cpp", "attention_forward_t",
       {"out": a(BTC), "preatt": a(B * NH * T * T), "att": a(B * NH * T * T), "inp": a(B * T * 3 * C),
        "B": i(B), "L": i(T), "C": i(C), "NH": i(NH)},
       outputs=["out", "preatt", "att"], tags=["llm.c", "causal attention", "template"]),
    _c("llm_gelu_d", "llm_gelu_d.cpp", "gelu_forward_d", {"out": a(8), "inp": a(8, -2, 2), "N": i(8)},
       outputs=["out"], tags=["llm.c", "gelu", "static const global", "double"]),
    _c("llm_gelu_t", "llm_gelu_t.cpp", "gelu_forward_t", {"out": a(8), "inp": a(8, -2, 2), "N": i(8)},
       outputs=["out"], tags=["llm.c", "gelu", "template"]),
    _c("llm_gelu_t_float", "llm_gelu_t.cpp", "gelu_forward_t", {"out": a(8), "inp": a(8, -2, 2), "N": i(8)},
       outputs=["out"], scalar="float", tags=["llm.c", "gelu", "template", "float instantiation"], **FLOAT_TOL),
    _c("llm_gelu_macro_f", "llm_gelu_macro_f.cpp", "gelu_macro_f", {"out": a(8), "inp": a(8, -2, 2), "N": i(8)},
       outputs=["out"], tags=["llm.c", "gelu", "float", "#define constant", "function-like macro", "M_PI"],
       **FLOAT_TOL),
    _c("llm_crossentropy_d", "llm_crossentropy_d.cpp", "crossentropy_forward_d",
       {"losses": a(BT), "logits": a(BT * V, -2, 2), "targets": ia(1, 4, 0, 2, 2, 3),
        "B": i(B), "T": i(T), "V": i(V)},
       outputs=["losses"], tags=["llm.c", "cross-entropy", "logsumexp", "int targets", "double"]),
    _c("llm_crossentropy_t", "llm_crossentropy_t.cpp", "crossentropy_mean_t",
       {"logits": a(4 * V, -2, 2), "targets": ia(3, 0, 4, 4), "N": i(4), "V": i(V)},
       tags=["llm.c", "cross-entropy", "mean loss", "template", "return T"]),
    _c("llm_residual_t", "llm_residual_t.cpp", "residual_forward_t",
       {"out": a(6), "a": a(6), "b": a(6), "N": i(6)}, outputs=["out"],
       tags=["llm.c", "residual", "template"],
       expected=lambda v: {"out": np.zeros(6), "a": v["_seed"]["out"], "b": v["_seed"]["out"]}),
    _c("llm_encoder_d", "llm_encoder_d.cpp", "encoder_forward_d",
       {"out": a(BTC), "tokens": ia(1, 3, 1, 0, 3, 4), "wte": a(V * C), "wpe": a(T * C),
        "B": i(B), "T": i(T), "C": i(C)},
       outputs=["out"], tags=["llm.c", "encoder", "wte+wpe", "int tokens", "repeated ids", "double"]),
    _c("llm_encoder_t", "llm_encoder_t.cpp", "encoder_forward_t",
       {"out": a(BTC), "tokens": ia(1, 3, 1, 0, 3, 4), "wte": a(V * C), "wpe": a(T * C),
        "B": i(B), "L": i(T), "C": i(C)},
       outputs=["out"], tags=["llm.c", "encoder", "template"]),
    _c("llm_matmul_d", "llm_matmul_d.cpp", "matmul_forward_d",
       {"out": a(BT * 5), "inp": a(BTC), "weight": a(5 * C), "bias": a(5),
        "B": i(B), "T": i(T), "C": i(C), "OC": i(5)},
       outputs=["out"], tags=["llm.c", "matmul", "bias", "pointer != nullptr", "double"]),
    _c("llm_matmul_d_nobias", "llm_matmul_d.cpp", "matmul_forward_d",
       {"out": a(BT * 5), "inp": a(BTC), "weight": a(5 * C), "bias": NULL,
        "B": i(B), "T": i(T), "C": i(C), "OC": i(5)},
       outputs=["out"], tags=["llm.c", "matmul", "null bias"]),
    _c("llm_block_d", "llm_block_d.cpp", "block_forward_d",
       {"out": a(BTC), "ln": a(BTC), "qkv": a(B * T * 3 * C), "att": a(B * NH * T * T), "y": a(BTC),
        "x": a(BTC), "g": a(C), "bta": a(C), "wqkv": a(3 * C * C), "wo": a(C * C),
        "B": i(B), "T": i(T), "C": i(C), "NH": i(NH)},
       outputs=["out", "ln", "qkv", "att", "y"],
       tags=["llm.c", "transformer block", "layernorm", "causal attention", "calls writing outputs", "double"]),
    _c("llm_mlp_block_d", "llm_mlp_block_d.cpp", "mlp_block_d",
       {"out": a(12), "h": a(18), "g": a(18), "x": a(12), "w1": a(24), "b1": a(6), "w2": a(24), "b2": a(4),
        "N": i(3), "C": i(4), "H": i(6)},
       outputs=["out", "h", "g"], tags=["llm.c", "mlp", "calls writing outputs", "scratch outputs", "residual"]),
    _c("detach_lse", "detach_lse.cpp", "detach_lse", {"out": a(3), "x": a(12, -3, 3), "N": i(3), "C": i(4)},
       outputs=["out"], tags=["torchclad::detach", "stop-gradient", "log-sum-exp"]),
    _c("ptr_local_moved", "ptr_local_moved.cpp", "ptr_local_moved", {"x": a(3), "n": i(3)},
       tags=["pointer into a local", "moved pointer", "offset on the tape"]),
    _c("ptr_local_repointed", "ptr_local_repointed.cpp", "ptr_local_repointed", {"x": a(7), "n": i(7)},
       tags=["pointer into a local", "re-pointed in a loop", "offset on the tape"]),
    # ---- checkpointed loops (#pragma torchclad checkpoint) ------------------------------------
    _c("ckpt_scalar_rec", "ckpt_scalar_rec.cpp", "ckpt_scalar_rec", {"x": s(0.2, 1), "a": s(0.5, 2), "n": i(10)},
       tags=["checkpoint", "every(K)", "scalar state", "overwritten parameter"]),
    _c("ckpt_scalar_rec_empty", "ckpt_scalar_rec.cpp", "ckpt_scalar_rec", {"x": s(0.2, 1), "a": s(0.5, 2), "n": i(0)},
       tags=["checkpoint", "zero iterations"]),
    _c("ckpt_inferred", "ckpt_inferred.cpp", "ckpt_inferred", {"y": a(5), "w": a(5), "n": i(5), "steps": i(11)},
       outputs=["y"], tags=["checkpoint", "inferred state", "local array state", "call in body"]),
    _c("ckpt_nested", "ckpt_nested.cpp", "ckpt_nested", {"w": a(2, 0.3, 0.9), "x": a(7), "n": i(7), "reps": i(3)},
       outputs=["w"], tags=["checkpoint", "nested in a loop", "input overwritten after the loop"]),
    _c("ckpt_leapfrog", "ckpt_leapfrog.cpp", "ckpt_leapfrog",
       {"q": a(3), "p": a(3), "k": a(3, 0.5, 2), "n": i(3), "steps": i(9), "h": sv(0.1)},
       wrt=["q", "p", "k"], outputs=["q", "p"], tags=["checkpoint", "state(...) clause", "two state arrays"]),
    _c("ckpt_moving_pointer", "ckpt_moving_pointer.cpp", "ckpt_moving_pointer",
       {"traj": a(8), "k": a(2, 0.5, 1.5), "x": s(0.1, 0.9), "n": i(8)}, wrt=["traj", "k", "x"], outputs=["traj"],
       tags=["checkpoint", "pointer in the snapshot"]),
    _c("ckpt_two_level", "ckpt_two_level.cpp", "ckpt_two_level",
       {"a": a(3), "x0": s(0.2, 0.8), "outer": i(5), "inner": i(6)},
       tags=["checkpoint", "nested checkpoints", "local array state"]),
    # ---- reverse loop order, fixed-lane reductions, stored results (opt/loop_order.py) ------
    _c("order_recurrence", "order_recurrence.cpp", "order_recurrence", {"y": a(6), "w": a(6), "n": i(6)},
       wrt=["y", "w"], outputs=["y"], tags=["reverse loop order", "recurrence through memory"]),
    _c("order_resets", "order_resets.cpp", "order_resets", {"out": a(11), "x": a(5), "n": i(5)},
       outputs=["out"], tags=["reverse loop order", "element overwritten every iteration", "strided writes"]),
    _c("order_lanes", "order_lanes.cpp", "order_lanes", {"z": a(37), "x": a(37), "a": s(), "b": s(-0.5, 0.5), "n": i(37)},
       outputs=["z"], tags=["reverse loop order", "fixed-lane reduction", "remainder"]),
    _c("order_lanes_short", "order_lanes.cpp", "order_lanes", {"z": a(5), "x": a(5), "a": s(), "b": s(-0.5, 0.5), "n": i(5)},
       outputs=["z"], tags=["fixed-lane reduction", "remainder only"]),
    _c("tile_interchange", "tile_interchange.cpp", "tile_interchange",
       {"y": a(24), "x": a(40), "w": a(15), "R": i(8), "K": i(5), "N": i(3)},
       outputs=["y"], tags=["register tile", "loop interchange", "accumulator sunk into memory"]),
    _c("tile_interchange_empty", "tile_interchange.cpp", "tile_interchange",
       {"y": a(24), "x": a(40), "w": a(15), "R": i(8), "K": i(0), "N": i(3)},
       outputs=["y"], tags=["loop interchange", "zero inner iterations"]),
    _c("tile_triangle", "tile_interchange.cpp", "tile_triangle",
       {"y": a(5), "x": a(25), "w": a(5), "K": i(5)}, outputs=["y"],
       tags=["no interchange: triangular bounds"]),
    # ---- loop distribution of a reverse nest (opt/fission.py); built with -fopenmp ----------
    _c("fission_rows", "fission_rows.cpp", "fission_rows",
       {"y": a(30), "x": a(24), "w": a(20), "b": a(5), "N": i(2), "T": i(3), "C": i(4), "O": i(5)},
       outputs=["y"], tags=["loop distribution", "interchanged nest of sums", "omp parallel for",
                            "collapse(2)", "seed reset in the last nest"]),
    _c("fission_rows_nobias", "fission_rows.cpp", "fission_rows",
       {"y": a(30), "x": a(24), "w": a(20), "b": NULL, "N": i(2), "T": i(3), "C": i(4), "O": i(5)},
       wrt=["y", "x", "w"], outputs=["y"], tags=["loop distribution", "null adjoint"]),
    _c("fission_rows_empty", "fission_rows.cpp", "fission_rows",
       {"y": a(30), "x": a(24), "w": a(20), "b": a(5), "N": i(2), "T": i(3), "C": i(0), "O": i(5)},
       outputs=["y"], tags=["loop distribution", "zero inner iterations"]),
    _c("fission_rows_w", "fission_rows.cpp", "fission_rows",
       {"y": a(30), "x": a(24), "w": a(20), "b": a(5), "N": i(2), "T": i(3), "C": i(4), "O": i(5)},
       wrt=["y", "w", "b"], outputs=["y"], tags=["interchanged nest of sums", "nothing kept in order"]),
    _c("fission_serial", "fission_rows.cpp", "fission_serial",
       {"y": a(15), "x": a(12), "w": a(20), "b": a(5), "R": i(3), "C": i(4), "O": i(5)},
       outputs=["y"], tags=["loop distribution", "serial nest", "interchanged nest of sums"]),
    _c("fission_serial_empty", "fission_rows.cpp", "fission_serial",
       {"y": a(15), "x": a(12), "w": a(20), "b": a(5), "R": i(0), "C": i(4), "O": i(5)},
       outputs=["y"], tags=["loop distribution", "zero outer iterations"]),
    _c("fission_chain", "fission_rows.cpp", "fission_chain",
       {"y": a(15), "u": a(15), "x": a(12), "w": a(20), "R": i(3), "C": i(4), "O": i(5)},
       outputs=["y", "u"], tags=["no loop distribution: adjoint read after it is added into"]),
    _c("unswitch_rows", "unswitch_rows.cpp", "unswitch_rows",
       {"y": a(17), "x": a(12, -1, 1), "N": i(3), "V": i(4), "S": i(6)},
       outputs=["y"], tags=["loop unswitched on a disjointness test", "test holds: no records"]),
    _c("unswitch_rows_overlap", "unswitch_rows.cpp", "unswitch_rows",
       {"y": a(8), "x": a(12, -1, 1), "N": i(3), "V": i(4), "S": i(2)},
       outputs=["y"], tags=["loop unswitched on a disjointness test",
                            "test fails: overlapping rows restored from the tape"]),
    *[_c(f"unswitch_null_{tag}", "unswitch_null.cpp", "unswitch_null",
         {"out": a(12), "inp": a(12), "weight": NULL if "w" in tag else a(4),
          "bias": NULL if "b" in tag else a(4), "scale": NULL if "s" in tag else a(4),
          "N": i(3), "C": i(4)},
         outputs=["out"], tags=["loop versioned on null tests of optional pointers",
                                "p, !p, p != NULL, p == 0, p ? a : b", what])
      for tag, what in (("all", "every pointer present: the copy without tests"),
                        ("nullw", "null weight: the loops as written"),
                        ("nullb", "null bias: the loops as written"),
                        ("nulls", "null scale: the outer copy that assumes it null"),
                        ("nullwbs", "every pointer null"))],
    _c("stored_result", "stored_result.cpp", "stored_result", {"out": a(12), "x": a(4), "n": i(4)},
       outputs=["out"], tags=["TORCHCLAD_WRITE_ONCE", "result read back (exp, tanh)", "local re-read"]),
    # ---- C++ written for Clad (issue #18): reproductions of what its tests showed -----------
    _c("global_read_write", "global_read_write.cpp", "global_read_write", {"x": s(), "t": s()},
       tags=["non-const global", "global written by a callee", "global adjoint reset per call"],
       expected=lambda v: {"x": -v["t"] * (1 + 2 * v["x"]), "t": -v["x"] * (1 + v["x"])}),
    _c("pointer_param_moved", "pointer_param_moved.cpp", "pointer_param_moved",
       {"arr": a(5), "n": i(5), "w": s()}, wrt="arr, w",
       tags=["pointer parameter reassigned", "pointer advanced in a loop"]),
    _c("int_result", "int_result.cpp", "int_result", {"k": i(2), "y": s(0.2, 0.5), "z": s(0.2, 0.5)},
       tags=["integer result", "float + double arithmetic"],
       expected=lambda v: {"y": 0.0, "z": 0.0}),
    _c("int_result_user", "int_result.cpp", "int_result_user", {"y": s(0.2, 0.5), "z": s(0.2, 0.5)},
       tags=["call returning an integer"], rtol=1e-4, atol=1e-6),
    _c("namespace_calls", "namespace_calls.cpp", "namespace_calls", {"x": s(), "y": s()},
       tags=["call into a nested namespace", "custom derivative in a nested namespace",
             "const reference parameters"]),
    _c("param_overwritten_not_wrt", "param_overwritten_not_wrt.cpp", "param_overwritten_not_wrt",
       {"i": s(), "j": s(), "k": s()}, wrt="i",
       tags=["parameter outside wrt overwritten", "partial wrt"]),
    *[_c(f"enum_param_{k}", "enum_param.cpp", "enum_param", {"x": s(), "y": s(0.5, 1.5), "op": i(k)},
         wrt="x, y", tags=["enum parameter", "switch on an enum"]) for k in range(4)],
    _c("template_nontype_elsewhere", "template_nontype_elsewhere.cpp", "template_nontype_elsewhere",
       {"x": s(), "y": s()}, tags=["non-type template in the source"]),
    _c("ref_params", "ref_params.cpp", "ref_params", {"y": s(), "x": a(4), "n": i(4), "w": s()},
       outputs=["y"], tags=["reference parameter", "reference output", "const reference",
                            "reference local", "reference argument"]),
    _c("comma_expr", "comma_expr.cpp", "comma_expr", {"a": s(0.5, 1.5), "b": s(0.5, 1.5), "c": s(0.5, 1.5)},
       tags=["comma operator", "comma as an lvalue", "assignment inside ?:", "assignment inside &&",
             "assignment as a value"]),
    _c("comma_expr_neg", "comma_expr.cpp", "comma_expr", {"a": s(0.5, 1.5), "b": s(0.5, 1.5), "c": s(-1.5, -0.5)},
       tags=["comma operator", "other branch of ?:"]),
    *[_c(f"cond_lvalue_{k}", "cond_lvalue.cpp", "cond_lvalue", {"x": s(*xr), "y": s(*yr)},
         tags=["?: as an assignment target", "assignments in both branches"])
      for k, (xr, yr) in enumerate((((0.5, 1.0), (-1.0, 0.0)), ((-1.0, -0.5), (0.5, 1.0)),
                                    ((0.1, 0.3), (0.1, 0.2))))],
    _c("struct_fields", "struct_fields.cpp", "struct_fields", {"x": s(), "y": s(), "w": s()},
       tags=["struct", "default member initializer", "nested struct", "aggregate init", "struct copy",
             "struct assignment", "pointer to struct", "simple constructor", "member function"]),
    _c("cond_decls", "cond_decls.cpp", "cond_decls", {"x": s(), "y": s(), "n": i(3)},
       tags=["declaration in if", "if init-statement", "declaration in while", "declaration in for "
             "condition", "switch init-statement", "case in a nested block", "do-while --n"]),
    *[_c(f"cond_decls_{n}", "cond_decls.cpp", "cond_decls", {"x": s(), "y": s(), "n": i(n)},
         tags=["switch init-statement", "case in a nested block"]) for n in (2, 4)],
    _c("range_for", "range_for.cpp", "range_for", {"x": s(), "y": s()},
       tags=["range-based for", "by reference", "by value", "initializer_list"]),
    _c("nondiff_attr", "nondiff_attr.cpp", "nondiff_attr", {"x": s(), "y": s(), "z": a(1)},
       wrt="x, y", tags=["non_differentiable variable", "non_differentiable function",
                         "non_differentiable field", "non_differentiable class",
                         "non_differentiable parameter"],
       fd_agrees=False,         # the attribute cuts derivatives on purpose (Clad's semantics)
       expected=lambda v: {"x": 2 * v["y"] + v["z"][0], "y": v["x"]}),
    _c("recursion", "recursion.cpp", "recursion", {"x": s(0.5, 1.5), "y": s(), "n": i(4)},
       tags=["recursion", "early return in a recursive function"]),
    _c("returns_pointer", "returns_pointer.cpp", "returns_pointer", {"x": s(0.5, 1.5), "y": s(-1.5, -0.5)},
       tags=["function returning a pointer", "function returning a reference", "call through *f()"]),
    _c("new_delete", "new_delete.cpp", "new_delete", {"i": s(), "j": s()},
       tags=["new", "new[] with a braced list", "new of a struct", "delete", "delete[]"]),
    _c("casts_rules", "casts_rules.cpp", "casts_rules", {"x": s(0.1, 0.4), "y": s(0.2, 0.6)},
       tags=["const_cast", "std::fma", "std::clamp", "static member function"]),
    _c("null_globals", "null_globals.cpp", "null_globals", {"x": s(), "w": a(1), "k": i(4), "z": s()},
       wrt="x, w", tags=["NULL", "static_assert", "short", "long double", "non-const global array",
                         "reference to a global"]),
    # ---- OpenMP parallel loops (reverse/omp.py, reverse/parallel.py); built with -fopenmp ----
    _c("omp_rows_shared", "omp_rows_shared.cpp", "omp_rows_shared",
       {"out": a(35), "inp": a(35), "w": a(7), "bias": a(7), "B": i(5), "C": i(7)},
       outputs=["out"], tags=["omp parallel for", "partial sums", "private rows", "per-row slots"]),
    _c("omp_rows_shared_nobias", "omp_rows_shared.cpp", "omp_rows_shared",
       {"out": a(35), "inp": a(35), "w": a(7), "bias": NULL, "B": i(5), "C": i(7)},
       wrt=["out", "inp", "w"], outputs=["out"], tags=["omp parallel for", "partial sums", "null adjoint"]),
    _c("omp_records", "omp_records.cpp", "omp_records", {"out": a(5), "inp": a(20, -0.7, 0.7), "B": i(5), "C": i(4)},
       outputs=["out"], tags=["omp parallel for", "per-iteration records", "trip count differs per iteration"]),
    _c("omp_while", "omp_while.cpp", "omp_while", {"out": a(5), "inp": a(20, -1.2, 1.2), "B": i(5), "C": i(4)},
       outputs=["out"], tags=["omp parallel for", "per-iteration records", "while", "serial reverse"]),
    _c("omp_step", "omp_step.cpp", "omp_step",
       {"out": a(16), "inp": a(24), "w": a(6), "N": i(8), "C": i(3), "OC": i(2)},
       outputs=["out"], tags=["omp parallel for", "constant step", "macro step", "partial sums"]),
    _c("omp_blocked", "omp_blocked.cpp", "omp_blocked",
       {"out": a(10), "x": a(10), "w": a(4), "N": i(10)},
       outputs=["out"], tags=["omp parallel for", "blocks of a row", "ternary bound",
                              "std::min bound", "&& bound", "partial sums"]),
    _c("omp_rowmax", "omp_rowmax.cpp", "omp_rowmax",
       {"out": a(5), "x": a(19), "N": i(5), "V": i(3), "Vp": i(4)},
       outputs=["out"], tags=["omp parallel for", "running max", "padded rows",
                              "run-time disjointness test", "named constant step"]),
    _c("omp_collapse", "omp_collapse.cpp", "omp_collapse",
       {"out": a(12), "inp": a(48), "B": i(2), "T": i(3), "C": i(4), "H": i(2)},
       outputs=["out"], tags=["omp parallel for", "collapse(2)", "triangular inner loop", "per-iteration records"]),
    _c("omp_collapse3", "omp_collapse3.cpp", "omp_collapse3",
       {"out": a(12), "inp": a(48), "B": i(2), "T": i(3), "C": i(4), "H": i(2)},
       outputs=["out"], tags=["omp parallel for", "collapse(3)", "outer loop parallel in reverse"]),
    _c("omp_down", "omp_down.cpp", "omp_down", {"out": a(7), "x": a(7), "a": s(0.5, 1.5), "n": i(7)},
       wrt=["out", "x", "a"], outputs=["out"], tags=["omp parallel for", "counting down", "scalar adjoint partial sums"]),
    _c("omp_scatter", "omp_scatter.cpp", "omp_scatter",
       {"out": a(15), "idx": ia(0, 2, 2, 3, 1), "table": a(12), "N": i(5), "C": i(3)},
       outputs=["out"], tags=["omp parallel for", "gather", "scatter by index", "serial reverse"]),
    _c("omp_callee", "omp_callee.cpp", "omp_callee", {"out": a(4), "inp": a(12), "B": i(4), "C": i(3)},
       outputs=["out"], tags=["omp parallel for", "call in a parallel loop", "serial reverse"]),
]

CASES_BY_NAME: dict[str, Case] = {c.name: c for c in CASES}
assert len(CASES_BY_NAME) == len(CASES), "duplicate case names"
