"""Simplify generated code.

`cse_calls`: a pure math call that appears more than once in a run of straight-line
statements, with none of its operands written in between, is computed once into a
`const` local. The reverse sweep needs this because rule pullbacks recompute results
(tanh's derivative uses tanh(x) again) and the same argument often reaches two adjoints.
Runs are cut at control flow, at writes to primal variables or memory, at tape pops and at
calls of other generated functions, so a hoisted value is always the value each use saw.
"""
from __future__ import annotations

import re

from dataclasses import replace

from .. import ir
from ..names import TAPE as TAPE_NAME
from ..rules import math as rules


def _pure_calls(s) -> list:
    out = []
    for e in ir.stmt_exprs(s):
        for x in ir.walk_expr(e):
            if isinstance(x, ir.Call) and not x.user and rules.lookup(ir.call_name(x.fn)) \
                    and not any(isinstance(y, ir.TapePop) for y in ir.walk_expr(x)):
                out.append(x)
    return out


def _cuts(s) -> bool:
    """Does s end a run (it may change a value a hoisted call read)?"""
    if not isinstance(s, (ir.Decl, ir.Assign)):
        return True
    if isinstance(s, ir.Assign):
        r = ir.root_var(s.target)
        if r is None or r.uid > 0:
            return True
    for e in ir.stmt_exprs(s):
        if any(isinstance(x, (ir.TapePop, ir.Call)) and
               (isinstance(x, ir.TapePop) or x.user or not rules.lookup(ir.call_name(x.fn)))
               for x in ir.walk_expr(e)):
            return True
    return False


class CSE:
    def __init__(self):
        self.n = 0

    def block(self, stmts) -> list:
        out: list = []
        run: list = []
        for s in stmts:
            if isinstance(s, (ir.Block, ir.If, ir.Loop)):
                out.extend(self.run(run))
                run = []
                out.append(self.nested(s))
            elif _cuts(s):
                run.append(s)
                out.extend(self.run(run))
                run = []
            else:
                run.append(s)
        out.extend(self.run(run))
        return out

    def nested(self, s):
        if isinstance(s, ir.Block):
            return replace(s, stmts=tuple(self.block(s.stmts)))
        if isinstance(s, ir.If):
            return replace(s, then=ir.Block(tuple(self.block(s.then.stmts))),
                           other=ir.Block(tuple(self.block(s.other.stmts))))
        return replace(s, body=ir.Block(tuple(self.block(s.body.stmts))))

    def run(self, stmts) -> list:
        counts: dict = {}
        first: dict = {}
        for i, s in enumerate(stmts):
            for c in _pure_calls(s):
                counts[c] = counts.get(c, 0) + 1
                first.setdefault(c, i)
        repeated = [c for c, k in counts.items() if k > 1]
        if not repeated:
            return list(stmts)
        # inner repeated calls first, so an outer hoisted call can use their temporaries
        order = sorted(repeated, key=lambda c: (first[c], len(list(ir.walk_expr(c)))))
        temps: dict = {}
        decls: dict = {}
        for c in order:
            t = ir.Type(c.type.base, 0, True, (), True)
            v = ir.Var(f"_cse{self.n}", t, 0)
            self.n += 1
            decls.setdefault(first[c], []).append(ir.Decl(v, _substitute(c, temps, top=False)))
            temps[c] = v
        out = []
        for i, s in enumerate(stmts):
            out.extend(decls.get(i, ()))
            out.append(_map_stmt_top_down(s, temps))
        return out


def _substitute(e, temps: dict, top: bool = True):
    """Top-down: a sub-expression equal to a hoisted call becomes its temporary."""
    if top and e in temps:
        return temps[e]
    kids = ir.children(e)
    if not kids:
        return e
    new = tuple(_substitute(k, temps) for k in kids)
    return e if new == kids else ir.rebuild(e, new)


def _map_stmt_top_down(s, temps):
    sub = lambda e: _substitute(e, temps)
    if isinstance(s, ir.Decl):
        return replace(s, init=sub(s.init) if s.init is not None else None,
                       init_list=tuple(sub(x) for x in s.init_list))
    if isinstance(s, ir.Assign):
        return replace(s, target=sub(s.target), value=sub(s.value))
    return s


def cse_calls(stmts) -> list:
    return CSE().block(list(stmts))


# ------------------------------------------------------------------ dead code
def _reads(stmts) -> set:
    """Names read anywhere (an assignment's target variable itself is not a read; a tape
    operation reads the tape; the names an OpenMP clause lists are: `reduction(+: e)` needs e
    declared)."""
    names = set()
    for s in stmts:
        for x in ir.walk_stmts(s):
            if isinstance(x, ir.Loop) and x.pragma:
                names |= set(re.findall(r"[A-Za-z_]\w*", x.pragma))
            exprs = list(ir.stmt_exprs(x))
            if isinstance(x, (ir.TapePush, ir.TapeArray)) or any(
                    isinstance(y, ir.TapePop) for e in exprs for y in ir.walk_expr(e)):
                names.add(TAPE_NAME)
            if isinstance(x, ir.Assign) and isinstance(x.target, ir.Var):
                exprs = [x.value]
            for e in exprs:
                for y in ir.walk_expr(e):
                    if isinstance(y, ir.Var):
                        names.add(y.name)
    return names


def _pure(e) -> bool:
    return e is None or not any(
        isinstance(x, ir.TapePop) or (isinstance(x, ir.Raw) and x.assigns)
        or (isinstance(x, ir.Call) and (x.user or not rules.lookup(ir.call_name(x.fn))))
        for x in ir.walk_expr(e))


def _drop(stmts, dead: set) -> list:
    """Drop pure writes to `dead` names, and declarations nothing after them in their block
    reads (the reverse sweep re-declares primal names, so liveness is per block)."""
    out = []
    stmts = list(stmts)
    for k, s in enumerate(stmts):
        if isinstance(s, ir.Decl) and not s.var.type.dims and \
                (s.var.name in dead or s.var.name not in _reads(stmts[k + 1:])):
            dead = dead | {s.var.name}              # its later assignments go too
            if _pure(s.init):
                continue
            if isinstance(s.init, (ir.Call, ir.TapePop)):   # keep the call or the pop
                out.append(ir.ExprStmt(s.init, s.loc))
                continue
            dead = dead - {s.var.name}
        if isinstance(s, ir.Assign) and isinstance(s.target, ir.Var) and \
                s.target.name in dead:
            if _pure(s.value):
                continue
            if isinstance(s.value, (ir.Call, ir.TapePop)):  # the tape must stay in step
                out.append(ir.ExprStmt(s.value, s.loc))
                continue
        if isinstance(s, ir.Block):
            s = replace(s, stmts=tuple(_drop(s.stmts, dead)))
        elif isinstance(s, ir.If):
            s = replace(s, then=ir.Block(tuple(_drop(s.then.stmts, dead))),
                        other=ir.Block(tuple(_drop(s.other.stmts, dead))))
        elif isinstance(s, ir.Loop):
            inc = tuple(x for x in s.inc if not (isinstance(x, ir.Assign) and _pure(x.value) and
                                                 isinstance(x.target, ir.Var) and
                                                 x.target.name in dead))
            s = replace(s, body=ir.Block(tuple(_drop(s.body.stmts, dead))), inc=inc)
            if _idle(s):
                continue
        out.append(s)
    return out


def _idle(loop: ir.Loop) -> bool:
    """An empty loop whose header only declares, tests and steps its own counter: it does
    nothing (C++ lets a loop without side effects be assumed to end), like the forward part of
    a pullback whose loop records nothing."""
    return not loop.body.stmts and _own_counter(loop) is not None


def dead_code(stmts, keep: set = frozenset()) -> list:
    """Remove locals that are never read, and pure assignments to them (to a fixed point)."""
    stmts = list(stmts)
    while True:
        declared = {x.var.name for s in stmts for x in ir.walk_stmts(s)
                    if isinstance(x, ir.Decl)}
        dead = declared - _reads(stmts) - set(keep)
        new = _drop(stmts, dead)
        if new == stmts:
            return stmts
        stmts = new


def dead_resets(stmts) -> list:
    """Drop statements that only zero local arrays declared in the same scope when nothing
    after them in the scope names those arrays (`for (j...) _d_acc[j] = 0;`, the reset of an
    adjoint array after its last use): the arrays end with the scope, so nothing reads those
    stores. Nested scopes first."""
    out = [_inner_resets(s) for s in stmts]
    local = {s.var.name for s in out if isinstance(s, ir.Decl) and s.var.type.is_array}
    local -= _escaping(out)
    if not local:
        return out
    kept: list = []
    named_later: set = set()
    for s in reversed(out):
        zeroed = _zeroed(s, local)
        if zeroed and not zeroed & named_later:
            continue
        named_later |= ir.stmt_names(s)
        kept.append(s)
    return kept[::-1]


def _escaping(stmts) -> set:
    """Names spelled other than as the `a` of `a[i]` (a pointer taken, an argument, a verbatim
    text): a store into such an array may be read through another name."""
    out: set = set()

    def expr(e) -> None:
        if isinstance(e, ir.Var):
            out.add(e.name)
            return
        if isinstance(e, ir.Index) and isinstance(e.base, ir.Var):
            expr(e.index)
            return
        for k in ir.children(e):
            expr(k)

    for s in stmts:
        for x in ir.walk_stmts(s):
            if isinstance(x, (ir.TapeArray, ir.VectorDecl)):
                out |= ir.stmt_names(x)
            for e in ir.stmt_exprs(x):
                expr(e)
    return out


def _zeroed(s, local: set) -> set:
    """The local arrays s only writes zeros into, or the empty set if s does anything else."""
    names: set = set()
    if not _only_zeroes(s, local, names):
        return set()
    return names


def _inner_resets(s):
    if isinstance(s, ir.Block):
        return replace(s, stmts=tuple(dead_resets(s.stmts)))
    if isinstance(s, ir.If):
        return replace(s, then=replace(s.then, stmts=tuple(dead_resets(s.then.stmts))),
                       other=replace(s.other, stmts=tuple(dead_resets(s.other.stmts))))
    if isinstance(s, ir.Loop):
        return replace(s, body=replace(s.body, stmts=tuple(dead_resets(s.body.stmts))))
    return s


def _only_zeroes(s, local: set, names: set) -> bool:
    """s writes nothing but zeros into elements of `local` arrays (collected in `names`; its
    own loop counters aside), and calls, pops and reads nothing that could have an effect."""
    if isinstance(s, ir.Assign):
        ok = (s.op == "=" and ir.is_null(s.value) and isinstance(s.target, ir.Index)
              and isinstance(s.target.base, ir.Var) and s.target.base.name in local
              and not _effects(s.target.index))
        if ok:
            names.add(s.target.base.name)
        return ok
    if isinstance(s, ir.Block):
        return bool(s.stmts) and all(_only_zeroes(x, local, names) for x in s.stmts)
    if isinstance(s, ir.Loop):
        return (not s.pragma and _own_counter(s) is not None and bool(s.body.stmts)
                and all(_only_zeroes(x, local, names) for x in s.body.stmts))
    return False


def _own_counter(loop: ir.Loop) -> "str | None":
    """The counter of a loop whose header only declares it, tests it and steps it, without
    effects (a reverse loop's `v-- > lo` allowed), else None."""
    if len(loop.init) != 1 or not isinstance(loop.init[0], ir.Decl) or loop.cond is None:
        return None
    v = loop.init[0].var.name
    steps_only = all(isinstance(x, ir.Assign) and isinstance(x.target, ir.Var)
                     and x.target.name == v and not _effects(x.value) for x in loop.inc)
    if steps_only and not _effects(loop.init[0].init) and \
            not _effects(loop.cond, allow_decrement_of=v):
        return v
    return None


def _effects(e, allow_decrement_of: str = "") -> bool:
    if e is None:
        return False
    for x in ir.walk_expr(e):
        if isinstance(x, (ir.TapePop, ir.Call)):
            return True
        if isinstance(x, ir.Raw) and not ir.is_reversed_cond_of(x, {allow_decrement_of}):
            return True   # the one verbatim expression allowed: a reverse loop's own `v-- > lo`
    return False
