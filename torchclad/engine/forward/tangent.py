"""Expression-level forward rules: the tangent of an expression, and the tangent pointer that
matches a primal pointer. Each visit_<Node> carries its math in its first comment line.

`tangent(e)` is None where the tangent is zero (nothing e reads has a tangent), so that a
zero never multiplies a partial that may be infinite (`pow(x, c)` with a constant c < 0 at
x = 0, the log of a negative base).
"""
from __future__ import annotations

from dataclasses import replace

from .. import ir, names
from ..errors import DiffError
from ..rules import math as rules
from .activity import Tangents, vector_of

ZERO = ir.Const("0", ir.INT)


def add(a, b, t):
    if a is None:
        return b
    if b is None:
        return a
    return ir.Binary("+", a, b, t)


def neg(e):
    if e is None:
        return None
    if isinstance(e, ir.Unary) and e.op == "-":
        return e.operand
    return ir.Unary("-", e, e.type)


def sub(a, b, t):
    if b is None:
        return a
    if a is None:
        return neg(b)
    return ir.Binary("-", a, b, t)


def real(t: ir.Type) -> ir.Type:
    """The scalar floating type of a tangent of a value of type t."""
    return ir.Type(t.base, 0, False, (), True)


def memory(t: ir.Type) -> ir.Type:
    """The type of the tangent of memory of type t (a pointer, array or struct): t's, floating
    (the tangent of a reference is a pointer, like its adjoint)."""
    return replace(t, real=True, ref=False)


def tangent_type(t: ir.Type) -> ir.Type:
    """The type of the tangent of an object of type t: a struct's is a struct of t."""
    return memory(t) if t.is_memory else real(t)


class TangentRules:
    def __init__(self, tangents: Tangents, tnames: dict, fn: ir.Function):
        self.t = tangents
        self.tnames = tnames            # uid -> tangent name (scalars, pointers, memory roots)
        self.loc = fn.loc
        self.fn = fn

    # ------------------------------------------------------------------ addressing
    def tvar(self, v: ir.Var) -> ir.Var:
        """The tangent variable of v: a scalar, or the tangent pointer/array/struct object of
        a memory root or pointer variable (same type as v's, floating)."""
        if v.type.is_memory:
            return ir.Var(self.tnames[v.uid], memory(v.type), 0)
        return ir.Var(self.tnames[v.uid], real(v.type), 0)

    def tlvalue(self, e) -> ir.Expr:
        """The tangent of the object the lvalue e names: the same element or field of the
        tangent of its memory (a struct's tangent is a struct of the same type)."""
        if isinstance(e, ir.Var):
            return self.tvar(e)
        if isinstance(e, ir.Index):
            return ir.Index(self.dptr(e.base), e.index, tangent_type(e.type))
        if isinstance(e, ir.Unary) and e.op == "*":
            return ir.Unary("*", self.dptr(e.operand), tangent_type(e.type))
        if isinstance(e, ir.Member):
            return ir.Member(self.tlvalue(e.base), e.name, tangent_type(e.type))
        raise DiffError(self.loc, f"cannot form the tangent of ({type(e).__name__}); "
                                  "assign a variable, an array element or a field")

    def dptr(self, e) -> ir.Expr:
        """The tangent pointer matching the primal pointer expression e (its memory has a
        tangent): same offsets, into the tangent of the same root."""
        t = memory(e.type)
        if isinstance(e, ir.Var):
            return self.tvar(e)
        if isinstance(e, ir.Index) and e.type.is_memory:
            return ir.Index(self.dptr(e.base), e.index, t)
        if isinstance(e, ir.Binary) and e.op in ("+", "-"):
            if e.lhs.type.is_memory:
                return ir.Binary(e.op, self.dptr(e.lhs), e.rhs, t)
            return ir.Binary("+", e.lhs, self.dptr(e.rhs), t)
        if isinstance(e, ir.Unary) and e.op == "&":
            x = e.operand
            if isinstance(x, ir.Index):
                return ir.Unary("&", ir.Index(self.dptr(x.base), x.index, real(x.type)), t)
            if isinstance(x, ir.Var):
                return ir.Unary("&", self.tvar(x), t)
            if isinstance(x, ir.Unary) and x.op == "*":
                return self.dptr(x.operand)
            if isinstance(x, ir.Member):
                return ir.Unary("&", self.tlvalue(x), t)
        if isinstance(e, ir.Cast):
            return ir.Cast(self.dptr(e.operand), t, e.style)
        if ir.is_null(e):
            return ir.Cast(ir.Const("nullptr", t), t, "c")
        if isinstance(e, ir.Cond):
            side = lambda x: ir.Cast(ir.Const("nullptr", t), t, "c") if ir.is_null(x) \
                else self.dptr(x)
            return ir.Cond(e.cond, side(e.then), side(e.other), t)
        if vector_of(e) is not None:
            # v.data() (generated code): the tangent vector's storage
            return ir.Raw(e.text, t, (self.tvar(vector_of(e)),))
        raise DiffError(self.loc, f"cannot form the tangent of pointer expression "
                                  f"({type(e).__name__}); index a parameter or local array")

    # ------------------------------------------------------------------ tangents
    def tangent(self, e, result=None):
        """The tangent of a floating expression, None when it is zero; `result` names a
        variable holding e's value (a rule written with its result reads it)."""
        if not self.t.expr(e):
            return None
        return getattr(self, "visit_" + type(e).__name__)(e, result)

    def visit_Var(self, e, result):
        # y = v;  dy = dv
        return self.tvar(e)

    def visit_Index(self, e, result):
        # y = p[i];  dy = dp[i]
        return ir.Index(self.dptr(e.base), e.index, real(e.type))

    def visit_Member(self, e, result):
        # y = s.x;  dy = _d_s.x  (the same field of the tangent struct)
        return self.tlvalue(e)

    def visit_Unary(self, e, result):
        if e.op == "*":
            # y = *p;  dy = *dp
            return ir.Unary("*", self.dptr(e.operand), real(e.type))
        if e.op == "-":
            # y = -x;  dy = -dx
            return neg(self.tangent(e.operand))
        if e.op == "+":
            return self.tangent(e.operand)
        return None

    def visit_Binary(self, e, result):
        l, r, t = e.lhs, e.rhs, e.type
        if e.op == "+":
            # y = l + r;  dy = dl + dr
            return add(self.tangent(l), self.tangent(r), t)
        if e.op == "-":
            # y = l - r;  dy = dl - dr
            return sub(self.tangent(l), self.tangent(r), t)
        if e.op == "*":
            # y = l * r;  dy = dl * r + l * dr
            dl, dr = self.tangent(l), self.tangent(r)
            return add(ir.Binary("*", dl, r, t) if dl is not None else None,
                       ir.Binary("*", l, dr, t) if dr is not None else None, t)
        if e.op == "/":
            # y = l / r;  dy = (dl * r - l * dr) / (r * r)
            dl, dr = self.tangent(l), self.tangent(r)
            if dr is None:
                return ir.Binary("/", dl, r, t)
            num = sub(ir.Binary("*", dl, r, t) if dl is not None else None,
                      ir.Binary("*", l, dr, t), t)
            return ir.Binary("/", num, ir.Binary("*", r, r, t), t)
        return None          # comparisons, logic, bit operations, %: no derivative

    def visit_Cond(self, e, result):
        # y = c ? a : b;  dy = c ? da : db
        a, b = self.tangent(e.then), self.tangent(e.other)
        return ir.Cond(e.cond, a if a is not None else ZERO, b if b is not None else ZERO,
                       real(e.type))

    def visit_Cast(self, e, result):
        # y = (T)x;  dy = (T)dx for a floating T; an integer T cuts the derivative
        if e.type.real and e.operand.type.real:
            d = self.tangent(e.operand)
            return ir.Cast(d, e.type, e.style) if d is not None else None
        return None

    def visit_Const(self, e, result):
        return None

    def visit_Call(self, e, result):
        # y = f(x0, x1);  dy = df/dx0 * dx0 + df/dx1 * dx1  (rule table)
        short = ir.call_name(e.fn).split("::")[-1]
        rule = rules.rule_for(e, self.loc, names.pushforward(short))
        if rule.zero:
            return None
        y = result if result is not None else e
        out = None
        for k, (arg, pb) in enumerate(zip(e.args, rule.pullbacks)):
            if pb is None or not self.t.expr(arg):
                continue
            typ = arg.type if arg.type.real else e.type
            out = add(out, rules.pushforward(rule, k, e.args, y, self.tangent(arg), typ),
                      real(e.type))
        return out

    def visit_Raw(self, e, result):
        # a rule application of generated code: the tangent of its template's expression
        x = rules.expand(e)
        if x is None:
            raise DiffError(self.loc, f"internal: cannot differentiate generated expression "
                                      f"'{e.text}'")
        return self.tangent(x)

    def visit_TapePop(self, e, result):
        raise DiffError(self.loc, "internal: a value read back from the tape inside an "
                                  "expression (forward mode takes pops as whole values)")
