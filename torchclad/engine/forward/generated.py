"""Generated functions as forward mode's input (forward over reverse).

A stop-gradient (`torchclad::detach(v)`) is `v` here (`as_function`): its reverse dropped the
derivative through v on purpose (the result does not depend on v where the kernel uses it), but
the pullback it left is a function of v like of any other value -- layernorm's pullback, with
the variance taken around detach(mean), changes with the mean -- and forward mode over that
pullback must see the whole function to give its exact derivative.

The reverse generator hands over each function it generated as IR (`Generated.functions`),
built with the engine's own names: its variables have no identities of their own (uid 0).
`renumber` gives every distinct name one identity (a generated function declares each name
once per scope, and re-declarations in a later scope, such as a recomputed local in the
sweep, are the same variable), so the analyses can key on uids as they do for user code.
"""
from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..rules import math as rules


def _expr(e, uid_of):
    if isinstance(e, ir.Var):
        return replace(e, uid=uid_of(e))
    if isinstance(e, ir.Call) and not e.user and len(e.args) == 1:
        rule = rules.lookup(ir.call_name(e.fn))
        if rule is not None and rule.identity:
            return _expr(e.args[0], uid_of)
    kids = ir.children(e)
    if not kids:
        return e
    return ir.rebuild(e, tuple(_expr(k, uid_of) for k in kids))


def _stmt(s, uid_of):
    ex = lambda e: _expr(e, uid_of) if e is not None else None
    st = lambda x: _stmt(x, uid_of)
    if isinstance(s, ir.Decl):
        return replace(s, var=ex(s.var), init=ex(s.init),
                       init_list=tuple(ex(e) for e in s.init_list))
    if isinstance(s, ir.Assign):
        return replace(s, target=ex(s.target), value=ex(s.value))
    if isinstance(s, ir.ExprStmt):
        return replace(s, expr=ex(s.expr))
    if isinstance(s, ir.Block):
        return replace(s, stmts=tuple(st(x) for x in s.stmts))
    if isinstance(s, ir.If):
        return replace(s, cond=ex(s.cond), then=st(s.then), other=st(s.other))
    if isinstance(s, ir.Loop):
        return replace(s, init=tuple(st(x) for x in s.init), cond=ex(s.cond),
                       inc=tuple(st(x) for x in s.inc), body=st(s.body))
    if isinstance(s, ir.Return):
        return replace(s, value=ex(s.value))
    if isinstance(s, ir.TapePush):
        return replace(s, value=ex(s.value))
    if isinstance(s, ir.TapeArray):
        return replace(s, data=ex(s.data), count=ex(s.count))
    if isinstance(s, ir.VectorDecl):
        return replace(s, var=ex(s.var), count=ex(s.count))
    return s


def renumber(fn: ir.Function, fixed: "dict | None" = None) -> ir.Function:
    """fn as forward mode differentiates it: one uid per variable name (globals keep theirs,
    and the names in `fixed` -- the globals of the generated code -- get theirs from it),
    stop-gradients replaced by their argument."""
    uids: dict = dict(fixed or {})

    def uid_of(v: ir.Var) -> int:
        if v.uid < 0:
            return v.uid
        return uids.setdefault(v.name, len(uids) + 1)

    params = tuple(replace(p, uid=uid_of(p)) for p in fn.params)
    return replace(fn, params=params, body=_stmt(fn.body, uid_of))


def declared_names(fn: ir.Function) -> set:
    """Every name a function spells: parameters, declarations, and names its expressions
    use (the tape, helpers' arguments)."""
    out = {p.name for p in fn.params}
    for s in ir.walk_stmts(fn.body):
        out |= ir.stmt_names(s)
    return out
