"""Forward mode's global tangents: a non-const floating global `g` that the differentiated
code touches has the tangent `_dt_g`, a global variable of the generated code (as the
reverse's adjoint `_d_g` is), which every pushforward of one request reads and writes and the
top request zeroes on entry (the value a global holds when the kernel is called does not
depend on its inputs). In forward over reverse the reverse's global adjoint `_d_g` is one
more such global (`with_adjoint_globals`), with the tangent `_dt__d_g`."""
from __future__ import annotations

from dataclasses import replace

from .. import ir, names
from ..emit import cpp
from .activity import tangent_globals


def with_adjoint_globals(module: ir.Module) -> ir.Module:
    """The module as forward over reverse sees it: the adjoint `_d_g` that the reverse gives a
    global `g` is a global too (of the generated code), with a tangent `_dt__d_g`."""
    extra = {}
    low = min([g.var.uid for g in module.globals.values()] + [0])
    for k, v in enumerate(tangent_globals(module.globals)):
        name = names.global_adjoint(v.name)
        extra[name] = ir.Global(ir.Var(name, replace(v.type, const=False), low - 1 - k))
    return replace(module, globals={**module.globals, **extra})


def tangent_names(module: ir.Module) -> dict:
    """uid -> tangent name of every global that may carry a tangent."""
    return {v.uid: names.global_tangent(v.name) for v in tangent_globals(module.globals)}


def used(module: ir.Module, fns) -> list:
    """The globals with a tangent that the functions spell, in name order."""
    uids = {x.uid for fn in fns for s in ir.walk_stmts(fn.body) for e in ir.stmt_exprs(s)
            for x in ir.walk_expr(e) if isinstance(x, ir.Var) and x.uid < 0}
    return [v for v in tangent_globals(module.globals) if v.uid in uids]


def _tangent(v: ir.Var) -> ir.Var:
    return ir.Var(names.global_tangent(v.name), ir.Type(v.type.base, 0, False, v.type.dims,
                                                        True), 0)


def declarations(globals_: list) -> tuple:
    """((name, text), ...): the global tangents' definitions."""
    out = []
    for v in globals_:
        t = _tangent(v)
        d = ir.Decl(t, None, (ir.Const("{}", t.type),)) if t.type.dims else \
            ir.Decl(t, ir.Cast(ir.Const("0", ir.INT), t.type, "fn"))
        out.append((t.name, cpp.block_text([d]) + "\n"))
    return tuple(out)


def resets(globals_: list) -> list:
    """The statements that zero the global tangents (the top request's first ones)."""
    out = []
    for v in globals_:
        t = _tangent(v)
        if not t.type.dims:
            out.append(ir.Assign("=", t, ir.Const("0", ir.INT)))
            continue
        k = ir.Var(names.numbered(names.RESET_INDEX, 0), ir.LONG, 0)
        out.append(ir.Loop((ir.Decl(k, ir.Const("0", ir.LONG)),),
                           ir.Binary("<", k, ir.element_count(t.type), ir.BOOL),
                           (ir.Assign("+=", k, ir.Const("1", ir.INT)),),
                           ir.Block((ir.Assign("=", ir.Index(t, k, t.type.element()),
                                               ir.Const("0", ir.INT)),))))
    return out


def reached(module: ir.Module, fn: ir.Function, seen=None) -> bool:
    """Whether fn, or a user function it calls, spells a global with a tangent."""
    seen = set() if seen is None else seen
    seen.add(fn.name)
    if used(module, [fn]):
        return True
    for s in ir.walk_stmts(fn.body):
        for e in ir.stmt_exprs(s):
            for x in ir.walk_expr(e):
                key = ir.function_key(x.fn) if isinstance(x, ir.Call) and x.user else None
                if key in module.functions and key not in seen and \
                        reached(module, module.functions[key], seen):
                    return True
    return False
