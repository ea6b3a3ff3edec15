"""Scalar promotion of loop-invariant adjoint accumulations.

In a reverse loop

    for (int i = n; i-- > 0; ) { _d_w[s] += _d_out[i] * v[i]; _d_v[s * n + i] += ...; }

`_d_w[s]` does not move with `i`, but the compiler must assume the store to `_d_v[...]` may
alias it: it reloads and stores `_d_w[s]` every iteration and cannot vectorize the loop. This
pass accumulates such a target in a local instead:

    T _acc0 = T(0);
    for (int i = n; i-- > 0; ) { _acc0 += _d_out[i] * v[i]; _d_v[s * n + i] += ...; }
    if (_acc0 != T(0)) _d_w[s] += _acc0;

Conditions, all checked on the generated IR of one loop:
- the statement is `A[e] += value` (or `*A += value`, the adjoint of a scalar parameter)
  directly in the loop's body, A an adjoint root (an adjoint parameter or local adjoint array)
  and e free of anything the loop changes;
- nothing else in the loop names A or a pointer derived from A (no other element of it is
  touched, nor passed to a callee's sweep), and the loop has no OpenMP pragma;
- distinct adjoint roots do not overlap. The engine's adjoint parameters are distinct buffers at
  the top level; for a callee that some call site passes two pointers into one array, the
  driver does not run this pass.

The flush is skipped when the sum is zero (a loop that ran no iteration must not touch A[e],
which may not exist then). Floating addition is reassociated: the result differs from the
unpromoted code in rounding only.
"""
from __future__ import annotations

from dataclasses import replace

from .. import ir

def promote_accumulations(stmts, roots: set) -> list:
    """stmts: a generated function body; roots: names of its adjoint roots (parameters and
    local adjoint arrays). Pointer locals derived from a root count as that root."""
    derived = derived_pointers(stmts, roots)
    counter = [0]
    return _block(list(stmts), roots, derived, counter)


def derived_pointers(stmts, roots) -> dict:
    """root name -> names that may point into it (itself and pointer locals derived from it)."""
    group = {r: {r} for r in roots}
    changed = True
    decls = [x for s in stmts for x in ir.walk_stmts(s)
             if isinstance(x, ir.Decl) and x.var.type.is_pointer and x.init is not None]
    while changed:
        changed = False
        for d in decls:
            names = ir.names_in(d.init)
            for r, g in group.items():
                if names & g and d.var.name not in g:
                    g.add(d.var.name)
                    changed = True
    return group


def _block(stmts, roots, derived, counter) -> list:
    out = []
    for s in stmts:
        s = _inner(s, roots, derived, counter)
        if isinstance(s, ir.Loop):
            out.extend(_promote(s, roots, derived, counter))
        else:
            out.append(s)
    return out


def _inner(s, roots, derived, counter):
    if isinstance(s, ir.Block):
        return replace(s, stmts=tuple(_block(list(s.stmts), roots, derived, counter)))
    if isinstance(s, ir.If):
        return replace(s, then=ir.Block(tuple(_block(list(s.then.stmts), roots, derived,
                                                     counter))),
                       other=ir.Block(tuple(_block(list(s.other.stmts), roots, derived,
                                                   counter))))
    if isinstance(s, ir.Loop):
        return replace(s, body=ir.Block(tuple(_block(list(s.body.stmts), roots, derived,
                                                     counter)), s.body.loc))
    return s


def _varying(loop: ir.Loop) -> set:
    out = set()
    for x in ir.walk_stmts(loop):
        if isinstance(x, (ir.Decl, ir.VectorDecl)):
            out.add(x.var.name)
        elif isinstance(x, ir.Assign):
            if isinstance(x.target, ir.Var):
                out.add(x.target.name)
    return out


def _mem_roots(e) -> set:
    out = set()
    for x in ir.walk_expr(e):
        if isinstance(x, ir.Index) or (isinstance(x, ir.Unary) and x.op == "*"):
            r = ir.root_var(x.base if isinstance(x, ir.Index) else x.operand)
            out.add(r.name if r is not None else "?")
    return out


def _written_memory(loop: ir.Loop) -> set:
    out = set()
    for x in ir.walk_stmts(loop):
        if isinstance(x, ir.Assign) and not isinstance(x.target, ir.Var):
            r = ir.root_var(x.target)
            out.add(r.name if r is not None else "?")
        elif isinstance(x, ir.TapeArray):
            out.add(x.var.name)
        elif isinstance(x, ir.ExprStmt):
            out.add("?")                  # a call: may write anything it is given
    return out


def _candidate(s, roots, varying, written):
    if not (isinstance(s, ir.Assign) and s.op == "+="):
        return None
    t = s.target
    if isinstance(t, ir.Unary) and t.op == "*" and isinstance(t.operand, ir.Var) \
            and t.operand.name in roots:
        return (t.operand.name, ir.Const("0", ir.INT))    # *_d_a: the adjoint of a scalar
    if not (isinstance(t, ir.Index) and isinstance(t.base, ir.Var) and t.base.name in roots):
        return None
    e = t.index
    if any(isinstance(x, (ir.TapePop, ir.Call, ir.Raw)) for x in ir.walk_expr(e)):
        return None
    if ir.names_in(e) & varying:
        return None
    mem = _mem_roots(e)
    if mem and (mem & written or "?" in written or "?" in mem):
        return None
    return (s.target.base.name, e)


def _index_of(target):
    return target.index if isinstance(target, ir.Index) else ir.Const("0", ir.INT)


def _promote(loop: ir.Loop, roots, derived, counter) -> list:
    if loop.pragma:
        return [loop]
    varying = _varying(loop)
    written = _written_memory(loop)
    body = list(loop.body.stmts)
    groups: dict = {}
    for k, s in enumerate(body):
        key = _candidate(s, roots, varying, written)
        if key is not None:
            groups.setdefault(key, []).append(k)
    if not groups:
        return [loop]
    by_root: dict = {}
    for (root, e), ks in groups.items():
        by_root.setdefault(root, []).append(((root, e), ks))
    chosen = {}
    for root, items in by_root.items():
        if len(items) != 1:
            continue                    # two different elements of one root: leave it
        key, ks = items[0]
        names = derived.get(root, {root})
        clean = True
        for k, s in enumerate(body):
            if k in ks:
                if (ir.names_in(s.value) | ir.names_in(_index_of(s.target))) & names:
                    clean = False
                continue
            if ir.stmt_names(s) & names:
                clean = False
        for part in (loop.init, loop.inc):
            for s in part:
                if ir.stmt_names(s) & names:
                    clean = False
        if loop.cond is not None and ir.names_in(loop.cond) & names:
            clean = False
        if clean:
            chosen[key] = ks
    if not chosen:
        return [loop]
    pre, post = [], []
    replaced = {}
    for (root, e), ks in chosen.items():
        target = body[ks[0]].target
        t = target.type.value()
        acc = ir.Var(f"_acc{counter[0]}", t, 0)
        counter[0] += 1
        zero = ir.Cast(ir.Const("0", ir.INT), t, "fn")
        pre.append(ir.Decl(acc, zero))
        post.append(ir.If(ir.Binary("!=", acc, zero, ir.BOOL),
                          ir.Block((ir.Assign("+=", target, acc),))))
        for k in ks:
            replaced[k] = replace(body[k], target=acc)
    new_body = [replaced.get(k, s) for k, s in enumerate(body)]
    return pre + [replace(loop, body=ir.Block(tuple(new_body), loop.body.loc))] + post
