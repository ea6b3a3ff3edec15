"""A loop that conditionally overwrites a scalar (a running max, an argmax): only the last
overwrite reaches the result, so only it carries a derivative.

    for (int i = lo; i < hi; i++)              T _v0 = v;  bool _took0 = false;  int _at0 = 0;
        if (c(i, v)) v = e(i);        ->       for (int i = lo; i < hi; i++)
                                                   if (c(i, _v0)) { _v0 = e(i); _took0 = true; _at0 = i; }
                                               if (_took0) v = e(_at0);

(`v = c ? e : v` alike). The loop then computes a copy of v that nothing differentiates, and
the one assignment after it gives v the same value and routes its adjoint to the last
element taken: no decision per iteration is recorded for the reverse sweep. It applies when
e does not read v, and reads only the counter, variables the loop does not change and
memory nothing in the loop writes (the loop writes nothing but v).
"""
from __future__ import annotations

from . import ir, names, rewrite


def rewrite_block(b: ir.Block, fresh) -> ir.Block:
    """b with every such loop rewritten (nested blocks too); fresh(prefix, type) -> a new
    local Var."""
    out = []
    for s in b.stmts:
        out.extend(_stmt(s, fresh))
    return ir.Block(tuple(out), b.loc)


def _stmt(s, fresh) -> list:
    if isinstance(s, ir.Block):
        return [rewrite_block(s, fresh)]
    if isinstance(s, ir.If):
        return [ir.If(s.cond, rewrite_block(s.then, fresh), rewrite_block(s.other, fresh),
                      s.loc)]
    if isinstance(s, ir.Loop):
        got = _last_write(s, fresh)
        if got is not None:
            return got
        return [ir.Loop(s.init, s.cond, s.inc, rewrite_block(s.body, fresh), s.loc, s.pragma,
                        s.do_while)]
    return [s]


def _pattern(s: ir.Loop):
    """(counter, condition, v, e) of `for (...) if (c) v = e;` / `v = c ? e : v`, or None."""
    if s.pragma or s.do_while or len(s.init) != 1 or len(s.inc) != 1 or s.cond is None:
        return None
    d, inc = s.init[0], s.inc[0]
    if not (isinstance(d, ir.Decl) and not d.var.type.real and not d.var.type.is_memory and
            isinstance(inc, ir.Assign) and isinstance(inc.target, ir.Var) and
            inc.target.uid == d.var.uid):
        return None
    body = list(s.body.stmts)
    while len(body) == 1 and isinstance(body[0], ir.Block):
        body = list(body[0].stmts)
    if len(body) != 1:
        return None
    st = body[0]
    if isinstance(st, ir.If) and not st.other.stmts:
        then = list(st.then.stmts)
        while len(then) == 1 and isinstance(then[0], ir.Block):
            then = list(then[0].stmts)
        if len(then) == 1 and isinstance(then[0], ir.Assign) and then[0].op == "=":
            return d.var, st.cond, then[0].target, then[0].value
        return None
    if isinstance(st, ir.Assign) and st.op == "=" and isinstance(st.value, ir.Cond) and \
            st.value.other == st.target:
        return d.var, st.value.cond, st.target, st.value.then
    return None


def _last_write(s: ir.Loop, fresh) -> "list | None":
    got = _pattern(s)
    if got is None:
        return None
    i, cond, v, e = got
    if not (isinstance(v, ir.Var) and v.type.is_real_scalar):
        return None
    if v.uid in ir.vars_in(e) or v.uid in ir.vars_in(s.cond):
        return None
    for x in list(ir.walk_expr(e)) + list(ir.walk_expr(cond)):
        if isinstance(x, (ir.TapePop, ir.Raw)) or (isinstance(x, ir.Call) and x.user):
            return None            # a user call could have effects
    L = s.loc
    copy = fresh(names.LAST_VALUE, v.type.value())
    took = fresh(names.LAST_TAKEN, ir.BOOL)
    at = fresh(names.LAST_INDEX, i.type.value())
    c2 = rewrite.map_expr_top_down(cond, lambda x: copy if isinstance(x, ir.Var) and
                                   x.uid == v.uid else None)
    then = ir.Block((ir.Assign("=", copy, e, L), ir.Assign("=", took, ir.Const("true", ir.BOOL), L),
                     ir.Assign("=", at, i, L)))
    loop = ir.Loop(s.init, s.cond, s.inc, ir.Block((ir.If(c2, then, ir.Block(), L),)), L)
    after = ir.If(took, ir.Block((ir.Assign("=", v, rewrite.substitute_vars(
        ir.ExprStmt(e), {i.uid: at}).expr, L),)), ir.Block(), L)
    return [ir.Decl(copy, v, (), L), ir.Decl(took, ir.Const("false", ir.BOOL), (), L),
            ir.Decl(at, ir.Cast(ir.Const("0", ir.INT), at.type, "fn"), (), L), loop, after]


def index_loops(body: ir.Block) -> dict:
    """uid of each `_at` index the rewrite made -> the loop whose counter it copies. Wherever
    the index is read (after the loop, under `if (_took)`) the loop ran and the index holds
    one value of its counter: it lies in the counter's range, and that range is not empty.
    Only indices assigned nowhere else, of loops whose bound does not read their counter."""
    writes: dict = {}
    for s in ir.walk_stmts(body):
        if isinstance(s, ir.Assign) and isinstance(s.target, ir.Var):
            writes[s.target.uid] = writes.get(s.target.uid, 0) + 1
    out = {}
    for s in ir.walk_stmts(body):
        at = _taken_index(s)
        if at is not None and writes.get(at.uid) == 1:
            out[at.uid] = s
    return out


def _taken_index(s) -> "ir.Var | None":
    """The index of a loop `_last_write` made, else None."""
    if not isinstance(s, ir.Loop) or len(s.init) != 1 or s.cond is None or \
            len(s.body.stmts) != 1 or not isinstance(s.body.stmts[0], ir.If):
        return None
    d, then = s.init[0], s.body.stmts[0].then.stmts
    if not (isinstance(d, ir.Decl) and then and isinstance(then[-1], ir.Assign) and
            isinstance(then[-1].target, ir.Var) and
            then[-1].target.name.startswith(names.LAST_INDEX) and
            isinstance(then[-1].value, ir.Var) and then[-1].value.uid == d.var.uid and
            d.var.uid not in ir.vars_in(s.cond.rhs if isinstance(s.cond, ir.Binary)
                                        else s.cond)):
        return None
    return then[-1].target
