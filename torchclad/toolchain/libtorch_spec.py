"""The spec of a LibTorch op (``torchclad aot``): what ``torchclad.function`` takes as lambdas,
as expressions that become C++.

A spec is a JSON object (``--spec FILE``) or the same pieces on the command line::

    {
      "inputs":  ["x", "w"],                        pointer params read from tensors, in order
      "outputs": {"out": "x.shape",                  {param: shape}: the arrays the kernel writes
                  "ss":  "[x.size(0)]"},
      "sizes":   {"B": "x.size(0)", "C": "x.size(1)", "eps": 1e-5},   {scalar param: value}
      "checks":  ["w.size(0) == C"],                 conditions a call must meet (optional)
      "indices": {"idx": "wte.size(0)"}              integer inputs whose values must lie in
    }                                                [0, value) (optional)

Expressions are Python syntax over the input tensors and the sizes declared before them:
``x.size(i)``, ``x.shape[i]``, ``x.numel()``, ``x.dim()``, ``x.ndim``, ``len(x)``, integers,
``+ - * // %``, ``min(...)``, ``max(...)``; a float size may also use floats and ``/``. A shape
is ``x.shape``, ``x.shape[a:b]``, a list such as ``[x.size(0), 4]`` or ``[*x.shape[:-1], C]``,
an integer (one dimension), or ``[]`` (a 0-dim tensor); in JSON an output may also be a list of
such items. Checks compare with ``== != < <= > >=`` and combine with ``and or not``. An output
that is also an input is updated on a copy of the input and has the input's shape (its
expression may be ``null``). A non-void kernel's return value is the op's last output.

Everything a C++ build would only discover at run time is refused here with the spec key and
the expression: unknown names, a tensor where a number is expected, Python's ``/`` between
integers, an expression this language does not have.
"""

from __future__ import annotations

import ast
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

__all__ = ["Spec", "SpecError", "load_spec", "spec_from_args", "Translator", "CppExpr",
           "cpp_string"]


class SpecError(ValueError):
    """The spec is malformed or does not fit the kernel's signature."""


@dataclass(frozen=True)
class Spec:
    inputs: tuple
    outputs: dict                  # param -> shape (str | int | list | None)
    sizes: dict = field(default_factory=dict)      # param -> str | int | float | bool
    checks: tuple = ()
    indices: dict = field(default_factory=dict)    # int input -> upper bound expression

    @staticmethod
    def of(obj: Mapping[str, Any], where: str = "spec") -> "Spec":
        """A Spec from a JSON-like mapping (unknown keys are an error: a typo must not pass)."""
        if not isinstance(obj, Mapping):
            raise SpecError(f"{where}: expected a JSON object with inputs, outputs, sizes, got "
                            f"{type(obj).__name__}")
        known = {"inputs", "outputs", "sizes", "checks", "indices"}
        extra = sorted(set(obj) - known)
        if extra:
            raise SpecError(f"{where}: unknown key(s) {extra}; a spec has {sorted(known)}")
        if "inputs" not in obj or "outputs" not in obj:
            raise SpecError(f"{where}: 'inputs' and 'outputs' are required, e.g. "
                            '{"inputs": ["x"], "outputs": {"out": "x.shape"}, '
                            '"sizes": {"n": "x.numel()"}}')
        inputs = obj["inputs"]
        if isinstance(inputs, str):  # "a, b" like Clad's argument strings
            inputs = [n.strip() for n in inputs.split(",") if n.strip()]
        checks = obj.get("checks") or ()
        if isinstance(checks, str):
            checks = [checks]
        for key, want in (("outputs", Mapping), ("sizes", Mapping), ("indices", Mapping)):
            if obj.get(key) is not None and not isinstance(obj[key], want):
                raise SpecError(f"{where}: '{key}' must be an object {{param: expression}}")
        if not isinstance(inputs, (list, tuple)) or not all(isinstance(n, str) for n in inputs):
            raise SpecError(f"{where}: 'inputs' must be a list of parameter names")
        if not isinstance(checks, (list, tuple)) or not all(isinstance(c, str) for c in checks):
            raise SpecError(f"{where}: 'checks' must be a list of expressions (strings)")
        return Spec(tuple(inputs), dict(obj["outputs"]), dict(obj.get("sizes") or {}),
                    tuple(checks), dict(obj.get("indices") or {}))


def load_spec(path: str | Path, name: str | None = None) -> Spec:
    """The spec in JSON file ``path``: one spec, or ``{function name: spec, ...}`` from which
    ``name``'s is taken."""
    p = Path(path)
    try:
        obj = json.loads(p.read_text())
    except OSError as e:
        raise SpecError(f"cannot read spec {p}: {e.strerror or e}; pass --spec FILE, or the "
                        "spec as --inputs / --output / --size (torchclad aot --help)") from None
    except json.JSONDecodeError as e:
        raise SpecError(f"{p}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
    if isinstance(obj, Mapping) and "inputs" not in obj and name is not None:
        if name not in obj:
            raise SpecError(f"{p}: no spec for {name!r} (the file has {sorted(obj)})")
        return Spec.of(obj[name], where=f"{p}: {name}")
    return Spec.of(obj, where=str(p))


def _pairs(items: Sequence[str], flag: str) -> dict:
    out = {}
    for item in items:
        name, eq, expr = item.partition("=")
        if not eq or not name.strip():
            raise SpecError(f"{flag} {item!r}: expected NAME=EXPRESSION, e.g. {flag} 'n=x.numel()'")
        out[name.strip()] = expr.strip()
    return out


def spec_from_args(inputs: str | None, outputs: Sequence[str], sizes: Sequence[str],
                   checks: Sequence[str], indices: Sequence[str]) -> Spec:
    """The spec given on the command line: ``--inputs "x, w" --output out=x.shape
    --size n=x.numel() --check ... --index idx=V``."""
    return Spec.of({"inputs": inputs or [], "outputs": _pairs(outputs, "--output"),
                    "sizes": _pairs(sizes, "--size"), "checks": list(checks),
                    "indices": _pairs(indices, "--index")}, where="command line")


def cpp_string(s: str) -> str:
    """``s`` as a C++ string literal."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


# ---------------------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class CppExpr:
    """An expression translated to C++: its text, its kind (``int``, ``float``, ``bool``,
    ``shape`` or ``parts``: a list of shape pieces), the sizes it reads, and the values a failed
    check prints (``(python text, C++ expr)``)."""
    code: str
    kind: str
    sizes: frozenset = frozenset()
    shown: tuple = ()


_ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}
_CMP = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


class Translator:
    """Translates spec expressions into C++ over ``in[i]`` (the op's input tensors, by
    position) and ``p.sizes.<name>`` (the sizes computed so far).

    ``dims`` collects ``(input, index, text)`` for every ``x.size(k)`` with a constant ``k``:
    the op checks that ``x`` has the dimensions before it evaluates anything."""

    def __init__(self, op: str, inputs: Sequence[str]):
        self.op = op
        self.inputs = {n: i for i, n in enumerate(inputs)}
        self.sizes: dict[str, str] = {}   # size param -> "int" / "float" / "bool"
        self.dims: dict[tuple[str, int], str] = {}
        self.where = ""

    # ---- entry points

    def parse(self, text: Any, where: str) -> ast.expr:
        self.where = where
        if isinstance(text, bool) or not isinstance(text, (str, int, float)):
            raise self.error(f"expected an expression (a string) or a number, got {text!r}")
        try:
            return ast.parse(str(text).strip(), mode="eval").body
        except SyntaxError as e:
            raise self.error(f"{text!r} is not an expression: {e.msg}") from None

    def expr(self, text: Any, where: str, want: str) -> CppExpr:
        """``text`` as a C++ value of kind ``want`` (``int``, ``float`` or ``bool``)."""
        e = self.visit(self.parse(text, where))
        if want == "float" and e.kind == "int":
            return CppExpr(f"static_cast<double>({e.code})", "float", e.sizes, e.shown)
        if want == "bool" and e.kind == "int" and self.where.startswith("sizes"):
            return CppExpr(f"({e.code} != 0)", "bool", e.sizes, e.shown)
        if e.kind != want:
            raise self.error(f"{_show(text)} is {_kind_name(e.kind)}; expected {_kind_name(want)}")
        return e

    def shape(self, value: Any, where: str) -> CppExpr:
        """An output shape: C++ ``{part, part...}`` for ``torchclad::lt::shape``."""
        if isinstance(value, list):  # JSON list: each item a number or an expression
            items = [self._shape_item(self.parse(v, where)) for v in value]
            return self._join(items)
        e = self.visit(self.parse(value, where))
        if e.kind == "int":
            return CppExpr(f"{{torchclad::lt::dim({e.code})}}", "parts", e.sizes)
        if e.kind in ("shape", "shape_slice"):
            return CppExpr(f"{{torchclad::lt::dims({e.code})}}", "parts", e.sizes)
        if e.kind == "parts":
            return e
        raise self.error(f"{_show(value)} is {_kind_name(e.kind)}; expected a shape such as "
                         "x.shape or [x.size(0), 4]")

    def error(self, msg: str) -> SpecError:
        return SpecError(f"{self.op}: {self.where}: {msg}")

    # ---- nodes

    def visit(self, n: ast.expr) -> CppExpr:
        fn = getattr(self, f"visit_{type(n).__name__}", None)
        if fn is None:
            raise self.error(f"{ast.unparse(n)!r}: {type(n).__name__} is not part of the spec's "
                             "expressions (sizes of inputs, integers, + - * // %, min, max, "
                             "comparisons)")
        return fn(n)

    def visit_Constant(self, n: ast.Constant) -> CppExpr:
        v = n.value
        if isinstance(v, bool):
            return CppExpr("true" if v else "false", "bool")
        if isinstance(v, int):
            return CppExpr(f"int64_t({v})" if v >= 0 else f"int64_t({v}LL)", "int")
        if isinstance(v, float):
            if not math.isfinite(v):
                raise self.error(f"{v!r}: a float constant must be finite")
            return CppExpr(repr(v), "float")  # repr always has a '.' or an exponent
        raise self.error(f"{v!r}: only numbers are constants here")

    def visit_Name(self, n: ast.Name) -> CppExpr:
        if n.id in self.inputs:
            raise self.error(f"{n.id!r} is a tensor; use {n.id}.size(i), {n.id}.shape, "
                             f"{n.id}.numel() or {n.id}.dim()")
        kind = self.sizes.get(n.id)
        if kind is None:
            raise self.error(f"{n.id!r} is neither an input ({', '.join(self.inputs) or 'none'}) "
                             "nor a size declared before this expression")
        code = f"static_cast<int64_t>(p.sizes.{n.id})" if kind == "int" else f"p.sizes.{n.id}"
        if kind == "float":
            code = f"static_cast<double>(p.sizes.{n.id})"
        return CppExpr(code, kind, frozenset({n.id}), ((n.id, code),))

    def _tensor(self, n: ast.expr) -> tuple[str, str] | None:
        """``(name, "in[i]")`` if ``n`` names an input tensor."""
        if isinstance(n, ast.Name) and n.id in self.inputs:
            return n.id, f"in[{self.inputs[n.id]}]"
        return None

    def _size(self, name: str, ref: str, index: ast.expr, text: str) -> CppExpr:
        k = self.visit(index)
        if k.kind != "int":
            raise self.error(f"{text}: the dimension index must be an integer")
        if isinstance(index, ast.Constant) or (isinstance(index, ast.UnaryOp)
                                               and isinstance(index.operand, ast.Constant)):
            self.dims.setdefault((name, int(ast.literal_eval(index))), text)
        return CppExpr(f"{ref}.size({k.code})", "int", k.sizes, ((text, f"{ref}.size({k.code})"),))

    def visit_Attribute(self, n: ast.Attribute) -> CppExpr:
        t = self._tensor(n.value)
        if t is not None and n.attr == "shape":
            return CppExpr(f"{t[1]}.sizes()", "shape")
        if t is not None and n.attr == "ndim":
            return CppExpr(f"{t[1]}.dim()", "int", shown=((ast.unparse(n), f"{t[1]}.dim()"),))
        raise self.error(f"{ast.unparse(n)!r}: expected x.shape or x.ndim of an input x")

    def visit_Call(self, n: ast.Call) -> CppExpr:
        text = ast.unparse(n)
        if n.keywords:
            raise self.error(f"{text!r}: keyword arguments are not supported")
        if isinstance(n.func, ast.Name) and n.func.id in ("min", "max") and len(n.args) >= 2:
            args = [self.visit(a) for a in n.args]
            if any(a.kind not in ("int", "float") for a in args):
                raise self.error(f"{text!r}: {n.func.id} takes numbers")
            kind = "float" if any(a.kind == "float" for a in args) else "int"
            ctype = "double" if kind == "float" else "int64_t"
            inner = ", ".join(f"{ctype}({a.code})" for a in args)
            return CppExpr(f"std::{n.func.id}<{ctype}>({{{inner}}})", kind,
                           frozenset().union(*(a.sizes for a in args)),
                           sum((a.shown for a in args), ()))
        if isinstance(n.func, ast.Name) and n.func.id == "len" and len(n.args) == 1:
            t = self._tensor(n.args[0])
            if t is not None:
                return self._size(t[0], t[1], ast.Constant(0), text)
        if isinstance(n.func, ast.Attribute):
            t = self._tensor(n.func.value)
            if t is None and isinstance(n.func.value, ast.Name):
                self.visit(n.func.value)  # says what the name is not
            m = n.func.attr
            if t is not None and m == "size" and len(n.args) == 1:
                return self._size(t[0], t[1], n.args[0], text)
            if t is not None and m == "size" and not n.args:
                return CppExpr(f"{t[1]}.sizes()", "shape")
            if t is not None and m in ("numel", "dim") and not n.args:
                return CppExpr(f"{t[1]}.{m}()", "int", shown=((text, f"{t[1]}.{m}()"),))
        raise self.error(f"{text!r}: expected x.size(i), x.size(), x.numel(), x.dim(), len(x), "
                         "min(...) or max(...)")

    def visit_Subscript(self, n: ast.Subscript) -> CppExpr:
        base = self.visit(n.value)
        text = ast.unparse(n)
        if base.kind != "shape":
            raise self.error(f"{text!r}: only a shape (x.shape) can be indexed")
        t = self._tensor(n.value.value) if isinstance(n.value, ast.Attribute) else None
        if isinstance(n.slice, ast.Slice):
            s = n.slice
            if s.step is not None:
                raise self.error(f"{text!r}: slices with a step are not supported")
            lo = self.expr_node(s.lower) if s.lower is not None else CppExpr("int64_t(0)", "int")
            hi = (self.expr_node(s.upper) if s.upper is not None
                  else CppExpr("torchclad::lt::kEnd", "int"))
            return CppExpr(f"{base.code}, {lo.code}, {hi.code}", "shape_slice",
                           lo.sizes | hi.sizes)
        if t is None:
            raise self.error(f"{text!r}: index x.shape of an input x")
        return self._size(t[0], t[1], n.slice, text)

    def expr_node(self, n: ast.expr) -> CppExpr:
        e = self.visit(n)
        if e.kind != "int":
            raise self.error(f"{ast.unparse(n)!r}: a slice bound must be an integer")
        return e

    def visit_UnaryOp(self, n: ast.UnaryOp) -> CppExpr:
        e = self.visit(n.operand)
        if isinstance(n.op, ast.Not) and e.kind == "bool":
            return CppExpr(f"(!{e.code})", "bool", e.sizes, e.shown)
        if isinstance(n.op, (ast.USub, ast.UAdd)) and e.kind in ("int", "float"):
            return CppExpr(f"({'-' if isinstance(n.op, ast.USub) else '+'}{e.code})", e.kind,
                           e.sizes, e.shown)
        raise self.error(f"{ast.unparse(n)!r}: operator not supported on {_kind_name(e.kind)}")

    def visit_BinOp(self, n: ast.BinOp) -> CppExpr:
        a, b = self.visit(n.left), self.visit(n.right)
        text = ast.unparse(n)
        sizes, shown = a.sizes | b.sizes, a.shown + b.shown
        if a.kind in ("shape", "parts", "shape_slice") or b.kind in ("shape", "parts",
                                                                     "shape_slice"):
            if not isinstance(n.op, ast.Add):
                raise self.error(f"{text!r}: shapes only concatenate with +")
            return self._join([self._as_parts(a, text), self._as_parts(b, text)])
        if a.kind not in ("int", "float") or b.kind not in ("int", "float"):
            raise self.error(f"{text!r}: arithmetic takes numbers")
        kind = "float" if "float" in (a.kind, b.kind) else "int"
        if type(n.op) in _ARITH:
            return CppExpr(f"({a.code} {_ARITH[type(n.op)]} {b.code})", kind, sizes, shown)
        if isinstance(n.op, ast.Div):
            if kind == "int":
                raise self.error(f"{text!r}: / between integers; use // (floor division)")
            return CppExpr(f"({a.code} / {b.code})", "float", sizes, shown)
        if isinstance(n.op, (ast.FloorDiv, ast.Mod)) and kind == "int":
            fn = "floordiv" if isinstance(n.op, ast.FloorDiv) else "floormod"
            return CppExpr(f"torchclad::lt::{fn}({cpp_string(self.op)}, {cpp_string(text)}, "
                           f"{a.code}, {b.code})", "int", sizes, shown)
        raise self.error(f"{text!r}: operator not supported (integers: + - * // %, floats: + - * /)")

    def visit_Compare(self, n: ast.Compare) -> CppExpr:
        parts, prev = [], self.visit(n.left)
        sizes, shown = prev.sizes, prev.shown
        for op, right in zip(n.ops, n.comparators):
            r = self.visit(right)
            if type(op) not in _CMP or prev.kind not in ("int", "float") or r.kind not in (
                    "int", "float"):
                raise self.error(f"{ast.unparse(n)!r}: comparisons are == != < <= > >= of numbers")
            parts.append(f"({prev.code} {_CMP[type(op)]} {r.code})")
            sizes, shown, prev = sizes | r.sizes, shown + r.shown, r
        return CppExpr("(" + " && ".join(parts) + ")", "bool", sizes, _unique(shown))

    def visit_BoolOp(self, n: ast.BoolOp) -> CppExpr:
        vals = [self.visit(v) for v in n.values]
        if any(v.kind != "bool" for v in vals):
            raise self.error(f"{ast.unparse(n)!r}: and / or combine conditions")
        op = " && " if isinstance(n.op, ast.And) else " || "
        return CppExpr("(" + op.join(v.code for v in vals) + ")", "bool",
                       frozenset().union(*(v.sizes for v in vals)),
                       _unique(sum((v.shown for v in vals), ())))

    def visit_List(self, n: ast.List | ast.Tuple) -> CppExpr:
        return self._join([self._shape_item(e) for e in n.elts])

    visit_Tuple = visit_List

    # ---- shapes

    def _shape_item(self, n: ast.expr) -> CppExpr:
        if isinstance(n, ast.Starred):
            e = self.visit(n.value)
            if e.kind not in ("shape", "shape_slice"):
                raise self.error(f"{ast.unparse(n)!r}: * unpacks a shape (x.shape[...])")
            return self._as_parts(e, ast.unparse(n))
        e = self.visit(n)
        if e.kind in ("shape", "shape_slice", "parts"):
            return self._as_parts(e, ast.unparse(n))
        if e.kind != "int":
            raise self.error(f"{ast.unparse(n)!r}: a dimension must be an integer")
        return CppExpr(f"torchclad::lt::dim({e.code})", "part", e.sizes)

    def _as_parts(self, e: CppExpr, text: str) -> CppExpr:
        if e.kind == "parts":
            return e
        if e.kind in ("shape", "shape_slice"):
            return CppExpr(f"torchclad::lt::dims({e.code})", "part", e.sizes)
        if e.kind == "int":
            return CppExpr(f"torchclad::lt::dim({e.code})", "part", e.sizes)
        raise self.error(f"{text!r}: not a shape")

    def _join(self, items: list[CppExpr]) -> CppExpr:
        codes = []
        for it in items:
            codes.append(it.code[1:-1] if it.kind == "parts" else it.code)
        return CppExpr("{" + ", ".join(c for c in codes if c) + "}", "parts",
                       frozenset().union(*(i.sizes for i in items)) if items else frozenset())


def _unique(shown: tuple) -> tuple:
    seen, out = set(), []
    for s in shown:
        if s[0] not in seen:
            seen.add(s[0])
            out.append(s)
    return tuple(out)


def _show(v: Any) -> str:
    return repr(v) if not isinstance(v, str) else repr(v.strip())


def _kind_name(kind: str) -> str:
    return {"int": "an integer", "float": "a float", "bool": "a condition", "shape": "a shape",
            "parts": "a shape", "shape_slice": "a shape", "part": "a shape"}.get(kind, kind)
