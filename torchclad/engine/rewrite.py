"""Rewrites of IR statements: apply a function to every expression a statement tree holds, or
substitute variables. Used by the passes that rename or re-express values (normalize's copies
of reassigned pointer parameters, the lowering of references)."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from . import ir


def map_expr_top_down(e, f: Callable):
    """f applied to e; where it returns None, to e's children (top-down)."""
    if e is None:
        return None
    got = f(e)
    if got is not None:
        return got
    kids = ir.children(e)
    if not kids:
        return e
    new = tuple(map_expr_top_down(k, f) for k in kids)
    return e if new == kids else ir.rebuild(e, new)


def map_stmt(s, f: Callable):
    """s with every expression it holds (nested statements too) mapped by
    ``map_expr_top_down(e, f)``."""
    m = lambda e: map_expr_top_down(e, f)
    if isinstance(s, ir.Decl):
        return replace(s, init=m(s.init), init_list=tuple(m(x) for x in s.init_list))
    if isinstance(s, ir.Assign):
        return replace(s, target=m(s.target), value=m(s.value))
    if isinstance(s, ir.ExprStmt):
        return replace(s, expr=m(s.expr))
    if isinstance(s, ir.Return):
        return replace(s, value=m(s.value))
    if isinstance(s, ir.Block):
        return replace(s, stmts=tuple(map_stmt(x, f) for x in s.stmts))
    if isinstance(s, ir.If):
        return replace(s, cond=m(s.cond), then=map_stmt(s.then, f), other=map_stmt(s.other, f))
    if isinstance(s, ir.Loop):
        return replace(s, init=tuple(map_stmt(x, f) for x in s.init), cond=m(s.cond),
                       inc=tuple(map_stmt(x, f) for x in s.inc), body=map_stmt(s.body, f))
    if isinstance(s, ir.Switch):
        return replace(s, cond=m(s.cond), body=map_stmt(s.body, f))
    if isinstance(s, ir.Case):
        return replace(s, value=m(s.value))
    if isinstance(s, ir.TapePush):
        return replace(s, value=m(s.value))
    return s


def substitute_vars(s, mapping: dict):
    """s with every variable whose uid is in ``mapping`` replaced by ``mapping[uid]``."""
    def f(e):
        if isinstance(e, ir.Var) and e.uid in mapping:
            return mapping[e.uid]
        return None
    return map_stmt(s, f)
