"""IR -> C++ text. Pure and deterministic: the same IR always prints the same text."""
from __future__ import annotations

from .. import ir, names

_PREC = {"||": 4, "&&": 5, "|": 6, "^": 7, "&": 8, "==": 9, "!=": 9, "<": 10, ">": 10,
         "<=": 10, ">=": 10, "<<": 11, ">>": 11, "+": 12, "-": 12, "*": 13, "/": 13, "%": 13}
_ATOM = 16


def _is_ref(e) -> bool:
    """A reference variable, or a call returning a reference (the IR holds its address)."""
    return isinstance(e, (ir.Var, ir.Call)) and e.type.ref


def _deref_of_ref(e):
    """The reference `r` (a variable or a call) that `r[0]` / `*r` reads, else None."""
    if isinstance(e, ir.Index) and _is_ref(e.base) and isinstance(e.index, ir.Const) and \
            e.index.text == "0":
        return e.base
    if isinstance(e, ir.Unary) and e.op == "*" and _is_ref(e.operand):
        return e.operand
    return None


def _binds_ref(e) -> bool:
    """`&x` that binds a reference (spelled `x`)."""
    return isinstance(e, ir.Unary) and e.op == "&" and e.type.ref


def prec(e) -> int:
    if _deref_of_ref(e) is not None:
        return _ATOM
    if _binds_ref(e):
        return prec(e.operand)
    if _is_ref(e):
        return 14
    if isinstance(e, ir.Binary):
        return _PREC.get(e.op, 3)
    if isinstance(e, ir.Cond):
        return 3
    if isinstance(e, ir.Unary):
        return 14
    if isinstance(e, ir.Cast):
        return 14 if e.style == "c" else _ATOM
    if isinstance(e, ir.Raw):
        return 2
    if isinstance(e, ir.Const) and e.text.startswith("-"):
        return 14
    return _ATOM


def _is_op(e, op: str) -> bool:
    return isinstance(e, ir.Binary) and e.op == op


class Printer:
    def __init__(self, scalar: str | None = None, template: tuple = ()):
        self.scalar = scalar
        self.template = template

    def type(self, t: ir.Type, name: str = "") -> str:
        return t.spell(name, scalar=self.scalar, template=self.template)

    # ------------------------------------------------------------------ expressions
    def expr(self, e, need: int = 0) -> str:
        s = self._expr(e)
        return f"({s})" if prec(e) < need else s

    def _expr(self, e) -> str:
        r = _deref_of_ref(e)
        if r is not None:
            return r.name if isinstance(r, ir.Var) else self._call(r)
        if _binds_ref(e):
            return self._expr(e.operand)
        if isinstance(e, ir.Var):
            return "&" + e.name if e.type.ref else e.name
        if isinstance(e, ir.Call) and e.type.ref:
            return "&" + self._call(e)
        if isinstance(e, ir.Const):
            return e.text
        if isinstance(e, ir.Index):
            return f"{self.expr(e.base, _ATOM)}[{self.expr(e.index)}]"
        if isinstance(e, ir.Member):
            b = e.base
            if isinstance(b, ir.Unary) and b.op == "*" and _deref_of_ref(b) is None:
                return f"{self.expr(b.operand, _ATOM)}->{e.name}"
            if isinstance(b, ir.Index) and isinstance(b.index, ir.Const) and \
                    b.index.text == "0" and _deref_of_ref(b) is None and b.base.type.ptr:
                return f"{self.expr(b.base, _ATOM)}->{e.name}"
            return f"{self.expr(b, _ATOM)}.{e.name}"
        if isinstance(e, ir.Unary):
            inner = self.expr(e.operand, 14)
            if e.op in ("-", "+") and inner.startswith(e.op):
                inner = f"({inner})"
            if e.op == "&" and isinstance(e.operand, ir.Unary) and e.operand.op == "*":
                return self.expr(e.operand.operand, 14)
            return f"{e.op}{inner}"
        if isinstance(e, ir.Binary):
            p = _PREC.get(e.op, 3)
            # parenthesize && inside || (and mixed bit/logic ops) as -Wparentheses asks
            need_l = p + 1 if e.op == "||" and _is_op(e.lhs, "&&") else p
            need_r = p + 2 if e.op == "||" and _is_op(e.rhs, "&&") else p + 1
            return f"{self.expr(e.lhs, need_l)} {e.op} {self.expr(e.rhs, need_r)}"
        if isinstance(e, ir.Call):
            return self._call(e)
        if isinstance(e, ir.Cond):
            return f"{self.expr(e.cond, 4)} ? {self.expr(e.then, 4)} : {self.expr(e.other, 3)}"
        if isinstance(e, ir.Cast):
            t = self.type(e.type)
            if e.style == "fn" and " " not in t and "*" not in t:
                return f"{t}({self.expr(e.operand)})"
            if e.style in ("static", "const"):
                return f"{e.style}_cast<{t}>({self.expr(e.operand)})"
            return f"({t}){self.expr(e.operand, 14)}"
        if isinstance(e, ir.TapePop):
            return f"{names.TAPE}.pop<{self.type(e.type)}>()"
        if isinstance(e, ir.Raw):
            return e.text.format(*[self.expr(r, _ATOM) for r in e.reads])
        raise TypeError(f"cannot print {type(e).__name__}")

    def _call(self, e) -> str:
        if e.method:                                   # obj.m(args) / p->m(args)
            obj, rest = e.args[0], ", ".join(self.expr(a) for a in e.args[1:])
            if isinstance(obj, ir.Unary) and obj.op == "&":
                return f"{self.expr(obj.operand, _ATOM)}.{e.method}({rest})"
            return f"{self.expr(obj, _ATOM)}->{e.method}({rest})"
        return f"{e.fn}({', '.join(self.expr(a) for a in e.args)})"

    # ------------------------------------------------------------------ statements
    def stmts(self, stmts, indent: int) -> list:
        out = []
        for s in stmts:
            out.extend(self.stmt(s, indent))
        return out

    def _decl(self, s: ir.Decl) -> str:
        text = ("static " if s.static else "") + self.type(s.var.type, s.var.name)
        if s.var.type.is_object and s.init is None:
            return text + "{}"                 # value-initialised (its constructor runs)
        if s.var.type.dims:
            if s.init_list:
                items = ", ".join(self.expr(x) for x in s.init_list)
                text += " = {}" if items == "{}" else f" = {{{items}}}"
        elif s.init is not None and s.var.type.ref and isinstance(s.init, ir.Call) and \
                s.init.type.ref:
            text += f" = {self._call(s.init)}"          # bound to what a call returns
        elif s.init is not None and s.var.type.ref and not _binds_ref(s.init):
            text += f" = *{self.expr(s.init, 14)}"      # a reference rebuilt from its address
        elif s.init is not None:
            text += f" = {self.expr(s.init)}"
        return text

    def _simple(self, s) -> str:
        if isinstance(s, ir.Assign):
            if s.op in ("+=", "-=") and isinstance(s.value, ir.Const) and s.value.text == "1" \
                    and not s.target.type.real:
                return ("++" if s.op == "+=" else "--") + self.expr(s.target, 14)
            return f"{self.expr(s.target)} {s.op} {self.expr(s.value)}"
        if isinstance(s, ir.Decl):
            return self._decl(s)
        if isinstance(s, ir.ExprStmt):
            return self._call(s.expr) if isinstance(s.expr, ir.Call) else self.expr(s.expr)
        raise TypeError(type(s).__name__)

    def stmt(self, s, indent: int) -> list:
        pad = "    " * indent
        if isinstance(s, (ir.Assign, ir.Decl, ir.ExprStmt)):
            return [pad + self._simple(s) + ";"]
        if isinstance(s, ir.Return):
            return [pad + ("return;" if s.value is None else f"return {self.expr(s.value)};")]
        if isinstance(s, ir.TapePush):
            return [pad + f"{names.TAPE}.push({self.expr(s.value)});"]
        if isinstance(s, ir.TapeArray):
            verb = "pop_array" if s.pop else "push_array"
            data = self.expr(s.data) + (".data()" if s.data.type.vector else "")
            return [pad + f"{names.TAPE}.{verb}({data}, {self.expr(s.count)});"]
        if isinstance(s, ir.VectorDecl):
            return [pad + f"{self.type(s.var.type, s.var.name)}({self.expr(s.count)});"]
        if isinstance(s, ir.Comment):
            return [pad + "// " + s.text]
        if isinstance(s, ir.Block):
            return [pad + "{"] + self.stmts(s.stmts, indent + 1) + [pad + "}"]
        if isinstance(s, ir.If):
            out = [pad + f"if ({self.expr(s.cond)}) {{"] + self.stmts(s.then.stmts, indent + 1)
            if s.other.stmts:
                if len(s.other.stmts) == 1 and isinstance(s.other.stmts[0], ir.If):
                    rest = self.stmt(s.other.stmts[0], indent)
                    return out + [pad + "} else " + rest[0].lstrip()] + rest[1:]
                out += [pad + "} else {"] + self.stmts(s.other.stmts, indent + 1)
            return out + [pad + "}"]
        if isinstance(s, ir.Loop):
            return self.loop(s, indent)
        if isinstance(s, (ir.Break,)):
            return [pad + "break;"]
        if isinstance(s, (ir.Continue,)):
            return [pad + "continue;"]
        if isinstance(s, ir.Switch):
            return [pad + f"switch ({self.expr(s.cond)}) {{"] + \
                self.stmts(s.body.stmts, indent + 1) + [pad + "}"]
        if isinstance(s, ir.Case):
            return [pad + ("default:" if s.value is None else f"case {self.expr(s.value)}:")]
        raise TypeError(f"cannot print {type(s).__name__}")

    def loop(self, s: ir.Loop, indent: int) -> list:
        pad = "    " * indent
        init = list(s.init)
        if len(init) > 1 or (init and not isinstance(init[0], (ir.Decl, ir.Assign))):
            inner = ir.Loop((), s.cond, s.inc, s.body, s.loc, s.pragma, s.do_while)
            return [pad + "{"] + self.stmts(init, indent + 1) + self.loop(inner, indent + 1) + \
                [pad + "}"]
        cond = self.expr(s.cond) if s.cond is not None else ""
        head_init = self._simple(init[0]) if init else ""
        inc = ", ".join(self._simple(x) for x in s.inc)
        body = self.stmts(s.body.stmts, indent + 1)
        if s.do_while:
            out = [pad + "do {"] + body + [pad + f"}} while ({cond});"]
        elif not head_init and not inc and cond:
            out = [pad + f"while ({cond}) {{"] + body + [pad + "}"]
        else:
            out = [pad + f"for ({head_init}; {cond}; {inc}) {{"] + body + [pad + "}"]
        if s.pragma:
            out = [f"{pad}#pragma {s.pragma}"] + out
        return out


def function(name: str, ret: ir.Type, params: list, body, template: tuple = (),
             comment: str = "") -> str:
    """params: list of (Type, name)."""
    p = Printer(template=template)
    head = ""
    if comment:
        head += "".join(f"// {line}\n" for line in comment.splitlines())
    if template:
        head += "template <" + ", ".join(f"typename {t}" for t in template) + ">\n"
    sig = f"{p.type(ret)} {name}(" + ", ".join(p.type(t, n) for t, n in params) + ")"
    lines = [head + sig + " {"] + p.stmts(body, 1) + ["}"]
    return "\n".join(lines) + "\n"


def block_text(stmts, indent: int = 0) -> str:
    return "\n".join(Printer().stmts(stmts, indent))


def spell(e) -> str:
    """The C++ text of one expression (for messages and printers)."""
    return Printer().expr(e)
