"""Reverse loop nests interchanged so the contiguous index runs innermost.

A register-tiled loop (llm.c's `matmul_forward`: LOOP_UNROLL rows kept in a small array
`result[]`, each weight loaded once per tile) runs a short loop over the tile inside the long
loop over the contiguous index `i`. Its reverse keeps that shape,

    for (int i = C; i-- > 0; ) {
        float w = weight[i + o * C];
        float _d_w = float(0);
        for (int ibt = LOOP_UNROLL; ibt-- > 0; ) {
            int bt = obt + ibt;
            _d_inp[bt * C + i] += _d_result[ibt] * w;
            _d_w += inp[bt * C + i] * _d_result[ibt];
        }
        _d_weight[i + o * C] += _d_w;
    }

which does not vectorise: the inner loop has LOOP_UNROLL iterations, it writes `_d_inp`
with stride C and sums `_d_w` serially. This pass emits the nest the other way round,

    for (int ibt = LOOP_UNROLL; ibt-- > 0; )
        for (int i = C; i-- > 0; ) {
            float w = weight[i + o * C];
            int bt = obt + ibt;
            _d_inp[bt * C + i] += _d_result[ibt] * w;
            _d_weight[i + o * C] += inp[bt * C + i] * _d_result[ibt];
        }

(then `loop_order.py` runs both loops forward): the inner loop streams four contiguous rows.

The outer loop's body must be: declarations of scalars (moved into the inner body: their
initialisers read nothing the nest changes), accumulators `T a = 0` that the inner loop only
accumulates into and that are afterwards only added once into memory, `M[e] += a` (e not moved
by the inner loop: the inner loop then accumulates into `M[e]` directly), and one reversed
canonical inner loop whose bounds do not depend on the outer one. The nest must be reorderable
as a whole: `loop_order.independent` over the new outer loop, with no element reset (= 0) in
it, so every iteration only reads memory the nest does not write and only accumulates into
memory the nest does not read: any order of the (outer, inner) pairs gives the same sums, up
to rounding. Interchange happens when the outer variable is the unit-stride term of more
memory accesses of the body than the inner variable (`_unit_strides`).

Runs before `promote.py`, which then sees the new inner loop.
"""
from __future__ import annotations

from .. import ir
from .loop_order import (additive_terms, independent, pointer_groups, reversed_bounds,
                         rewrite_loops)


def interchange(stmts, roots: set) -> list:
    """stmts: a generated function body; roots: names of its adjoint roots."""
    group = pointer_groups(stmts, roots)
    return [rewrite_loops(s, lambda loop: _swap(loop, group), inner_first=True) for s in stmts]


def _swap(outer: ir.Loop, group):
    """The interchanged nest, or None when `outer` is not such a nest or it does not pay."""
    ob = reversed_bounds(outer)
    if ob is None:
        return None
    body = list(outer.body.stmts)
    loops = [k for k, x in enumerate(body) if isinstance(x, ir.Loop)]
    if len(loops) != 1:
        return None
    inner = body[loops[0]]
    ib = reversed_bounds(inner)
    if ib is None:
        return None
    prefix, suffix = body[:loops[0]], body[loops[0] + 1:]
    inner_names = _assigned(inner)
    sunk, accs = [], {}
    for d in prefix:
        if not (isinstance(d, ir.Decl) and d.init is not None and not d.static
                and not d.init_list and not d.var.type.dims and not d.var.type.is_pointer):
            return None
        if _is_zero(d.init) and d.var.type.is_real_scalar:
            accs[d.var.name] = None               # an accumulator: its flush is in the suffix
        elif d.var.name in inner_names or ir.names_in(d.init) & inner_names:
            return None
        else:
            sunk.append(d)
    if any(ir.names_in(d.init) & set(accs) for d in sunk):
        return None                               # reads an accumulator, which goes away
    flushes = _flushes(suffix, accs, inner_names)
    if flushes is None:
        return None
    new_body = _redirect(inner.body, flushes)
    if new_body is None:
        return None
    new_body = ir.Block(tuple(sunk) + new_body.stmts, inner.body.loc)
    # the inner bounds must not move with the outer loop (nor with what its body declares)
    moving = {ob[0].name} | {d.var.name for d in prefix}
    if (ir.names_in(ib[1]) | ir.names_in(ib[2])) & moving:
        return None
    if _unit_strides(new_body, ob[0]) <= _unit_strides(new_body, ib[0]):
        return None
    new_inner = ir.Loop(outer.init, outer.cond, outer.inc, new_body, outer.loc)
    nest = ir.Loop(inner.init, inner.cond, inner.inc, ir.Block((new_inner,)), inner.loc)
    scan = independent(nest, reversed_bounds(nest), group)
    if scan is None or scan.reset_mem or independent(new_inner, ob, group) is None:
        return None
    return nest


def _is_zero(e) -> bool:
    while isinstance(e, ir.Cast):
        e = e.operand
    return isinstance(e, ir.Const) and e.text.rstrip("fFlL") in ("0", "0.0", "0.")


def _assigned(loop: ir.Loop) -> set:
    """Names a loop declares or assigns (its variable included)."""
    out = set()
    for x in ir.walk_stmts(loop):
        if isinstance(x, (ir.Decl, ir.VectorDecl)):
            out.add(x.var.name)
        elif isinstance(x, ir.Assign) and isinstance(x.target, ir.Var):
            out.add(x.target.name)
    out |= {x.reads[0].name for x in ir.walk_expr(loop.cond)
            if isinstance(x, ir.Raw) and x.assigns and isinstance(x.reads[0], ir.Var)} \
        if loop.cond is not None else set()
    return out


def _flushes(suffix, accs: dict, inner_names: set):
    """{accumulator: the memory target it is added into} when the suffix is exactly one
    `M[e] += a` per accumulator a, e unchanged by the inner loop; else None."""
    out = {}
    for s in suffix:
        if not (isinstance(s, ir.Assign) and s.op == "+=" and isinstance(s.value, ir.Var)
                and s.value.name in accs and s.value.name not in out
                and isinstance(s.target, (ir.Index, ir.Unary))):
            return None
        if ir.names_in(s.target) & (inner_names | set(accs)):
            return None
        out[s.value.name] = s.target
    return out if set(out) == set(accs) else None


def _redirect(block: ir.Block, flushes: dict):
    """The inner body with `a += x` made `M[e] += x`; None if an accumulator is used
    otherwise (read, assigned, or accumulated other than at the top level of the body)."""
    out = []
    for s in block.stmts:
        if (isinstance(s, ir.Assign) and isinstance(s.target, ir.Var)
                and s.target.name in flushes and s.op in ("+=", "-=")):
            if ir.names_in(s.value) & set(flushes):
                return None
            out.append(ir.Assign(s.op, flushes[s.target.name], s.value, s.loc))
        elif ir.stmt_names(s) & set(flushes):
            return None
        else:
            out.append(s)
    return ir.Block(tuple(out), block.loc)


def _unit_strides(body: ir.Block, v: ir.Var) -> int:
    """How many memory accesses of body have v as a term of their index (stride 1 in v);
    an int local of the body declared as a sum counts through its terms."""
    sums = {}
    for x in ir.walk_stmts(body):
        if isinstance(x, ir.Decl) and x.init is not None and not x.var.type.real \
                and not x.var.type.is_pointer:
            sums[x.var.name] = x.init
    n = 0
    for x in ir.walk_stmts(body):
        for e in ir.stmt_exprs(x):
            for y in ir.walk_expr(e):
                if isinstance(y, ir.Index) and _has_unit_term(y.index, v, sums, 3):
                    n += 1
    return n


def _has_unit_term(e, v: ir.Var, sums: dict, depth: int) -> bool:
    terms: list = []
    additive_terms(e, terms)
    for t in terms:
        if isinstance(t, ir.Var):
            if t.name == v.name:
                return True
            if depth and t.name in sums and _has_unit_term(sums[t.name], v, sums, depth - 1):
                return True
    return False
