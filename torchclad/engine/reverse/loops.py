"""Canonical loops: `for (int i = lo; i < hi; i++)` (or counting down by one) with i, lo and
hi unchanged by the body. Such a loop needs no iteration count on the tape: its reverse runs
`for (i = hi; i-- > lo; )`, and its counter is the reverse's own."""
from __future__ import annotations

from dataclasses import dataclass

from .. import ir
from ..analysis.effects import call_writes


@dataclass(frozen=True)
class CanonLoop:
    var: ir.Var
    lo: ir.Expr
    hi: ir.Expr          # exclusive upper bound for up loops, inclusive lower for down loops
    up: bool


def canonical(s: ir.Loop, rv) -> "CanonLoop | None":
    """for (int i = lo; i < hi; i += 1) with i, lo, hi unchanged by the body."""
    if len(s.init) != 1 or len(s.inc) != 1 or s.cond is None:
        return None
    d, inc, c = s.init[0], s.inc[0], s.cond
    if not isinstance(d, ir.Decl) or d.var.type.real or d.var.type.is_memory or \
            d.init is None:
        return None
    v = d.var
    if not (isinstance(inc, ir.Assign) and isinstance(inc.target, ir.Var) and
            inc.target.uid == v.uid and inc.op in ("+=", "-=") and
            isinstance(inc.value, ir.Const) and inc.value.text == "1"):
        return None
    if not (isinstance(c, ir.Binary) and isinstance(c.lhs, ir.Var) and c.lhs.uid == v.uid):
        return None
    up = inc.op == "+="
    if up and c.op not in ("<", "<="):
        return None
    if not up and c.op not in (">", ">="):
        return None
    hi = c.rhs
    if c.op == "<=":
        hi = ir.Binary("+", hi, ir.Const("1", ir.INT), hi.type)
    if c.op == ">":
        hi = ir.Binary("+", hi, ir.Const("1", ir.INT), hi.type)
    body_writes_vars = set()
    body_writes_mem = set()
    for st in ir.walk_stmts(s.body):
        if isinstance(st, ir.Assign):
            if isinstance(st.target, ir.Var):
                body_writes_vars.add(st.target.uid)
            else:
                r = rv.al.root_of(st.target)
                if r is not None:
                    body_writes_mem.add(r.uid)
                    body_writes_vars.add(r.uid)
        call = rv.user_call(st) if isinstance(st, (ir.Assign, ir.Decl, ir.ExprStmt)) \
            else None
        if call is not None:
            for i in call_writes(rv.module, call):
                r = rv.al.root_of(call.args[i])
                if r is not None:
                    body_writes_mem.add(r.uid)
                    body_writes_vars.add(r.uid)
    for e in (d.init, c.rhs):
        for x in ir.walk_expr(e):
            if isinstance(x, ir.Var) and x.uid in body_writes_vars:
                return None
            if isinstance(x, (ir.Index, ir.Unary)) and not isinstance(x, ir.Var):
                r = ir.root_var(x)
                if r is not None and rv.al.roots.get(r.uid, r).uid in body_writes_mem:
                    return None
            if isinstance(x, ir.Call):
                return None
    if v.uid in body_writes_vars:
        return None
    if ("var", v.uid) in rv.facts.address_taken:
        return None
    return CanonLoop(v, d.init, hi, up)
