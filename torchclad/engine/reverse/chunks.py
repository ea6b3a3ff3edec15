"""The reverse of a parallel nest in a fixed number of chunks, with partial sums.

An adjoint every iteration of a parallel reverse loop adds into (a layernorm's d weight summed
over rows, a scalar parameter's adjoint, a table row two tokens share) cannot be added into
by several threads at once. The iterations run instead in k chunks of consecutive iterations,
k from the sizes only (runtime `par_chunks`: at most 16, and few enough that the partial sums
stay small against the loop's work), each chunk adding into a zeroed copy of its own; then
`par_combine` adds the copies into the adjoint in chunk order. The same bits for any number
of threads: no atomics, no OpenMP reduction. omp.py decides when (parallel.py's plan has
partials); the nest helpers both use are here too.
"""
from __future__ import annotations

from .. import ir, names

VOID = ir.VOID


def spell_or_empty(e) -> str:
    """e as C++ text, "" for None (a pragma's optional condition)."""
    from ..emit.cpp import spell
    return spell(e) if e is not None else ""


def trip_decls(asm, levels) -> "tuple[list, list]":
    """Locals holding each level's trip count, and their declarations."""
    out, decls = [], []
    for _, _, c in levels:
        v = asm.names.fresh(names.SAVED_PREFIX, ir.LONG)
        decls.append(ir.Decl(v, c.trips()))
        out.append(v)
    return out, decls


def product(vs) -> ir.Expr:
    e = vs[0]
    for v in vs[1:]:
        e = ir.Binary("*", e, v, ir.LONG)
    return e


def rebuild(levels, body: list, pragma: str) -> ir.Loop:
    """The nest with the loops' own headers around `body`, `pragma` on the outer loop."""
    inner = list(body)
    for j in reversed(range(len(levels))):
        s = levels[j][0]
        loop = ir.Loop(s.init, s.cond, s.inc, ir.Block(tuple(inner)), s.loc,
                       pragma if j == 0 else "")
        inner = [loop]
    return inner[0]


def chunked(asm, nt, width: int, trips: list, total, body: list, plan) -> list:
    """The reverse nest as a fixed number of chunks of consecutive iterations of its outer
    `width` loops, each adding into partial sums of its own (see the module docstring)."""
    L = ir.LONG
    par, ser = nt.levels[:width], nt.levels[width:]
    out = []
    if not trips:
        trips, decls = trip_decls(asm, nt.levels)
        out += decls
    n_par = trips[0] if width == 1 else asm.names.fresh(names.SAVED_PREFIX, L)
    if width > 1:
        out.append(ir.Decl(n_par, product(trips[:width])))
    g = None
    if plan.guard is not None:
        g = asm.names.fresh(names.SAVED_PREFIX, ir.BOOL)
        out.append(ir.Decl(g, plan.guard))
    extents = []
    for pt in plan.partials:
        if pt.extent is not None:
            e = asm.names.fresh(names.SAVED_PREFIX, L)
            out.append(ir.Decl(e, pt.extent))
            extents.append(e)
        else:
            extents.append(None)
    size = None
    for e in extents:
        e = e if e is not None else ir.Const("1", L)
        size = e if size is None else ir.Binary("+", size, e, L)
    K = asm.names.fresh(names.SAVED_PREFIX, L)
    work = _work(asm, nt, width, trips)
    chunks = ir.Call(names.PAR_CHUNKS, (n_par, size) + ((work,) if work is not None else ()), L)
    out.append(ir.Decl(K, chunks if g is None else ir.Cond(g, chunks, ir.Const("1", L), L)))
    # one chunk (assumptions that fail, or partial sums too large to copy): the iterations
    # add into the adjoints themselves, in order
    g = asm.names.fresh(names.SAVED_PREFIX, ir.BOOL)
    out.append(ir.Decl(g, ir.Binary(">", K, ir.Const("1", L), ir.BOOL)))
    c = asm.names.fresh(names.SAVED_PREFIX, L)
    decls, head, tail, after = _partial_sums(asm, plan.partials, extents, K, g, c)
    out += decls
    k = asm.names.fresh(names.SAVED_PREFIX, L)
    begin = lambda x: ir.Call(names.PAR_BEGIN, (x, n_par, K), L)
    derived = []
    for j, (_, _, cl) in enumerate(par):
        kj = k
        below = trips[j + 1:width]
        if below:
            kj = ir.Binary("/", kj, product(below), L)
        if j > 0:
            kj = ir.Binary("%", kj, trips[j], L)
        derived.append(ir.Decl(cl.var, cl.value(kj)))
    inner = rebuild(ser, body, "") if ser else None
    iter_body = derived + ([inner] if inner is not None else body)
    k_loop = ir.Loop((ir.Decl(k, begin(c)),),
                     ir.Binary("<", k, begin(ir.Binary("+", c, ir.Const("1", L), L)), ir.BOOL),
                     (ir.Assign("+=", k, ir.Const("1", ir.INT)),), ir.Block(tuple(iter_body)))
    conds = [c for c in (nt.user_if(), spell_or_empty(g)) if c]
    pragma = "omp parallel for" + nt.carried() + f" if({' && '.join(conds)})"
    c_loop = ir.Loop((ir.Decl(c, ir.Const("0", L)),), ir.Binary("<", c, K, ir.BOOL),
                     (ir.Assign("+=", c, ir.Const("1", ir.INT)),),
                     ir.Block(tuple(head + [k_loop] + tail)), nt.loc, pragma)
    return out + [c_loop] + after


def _work(asm, nt, width: int, trips: list) -> "ir.Expr | None":
    """How many innermost iterations one iteration of the parallel loops runs: the trip counts
    of the serial levels times, summed over the loops of the body, the products of the trip
    counts of the loops nested there (1 for a body without loops) -- the work the partial
    sums of a chunk must be small against (par_chunks). None when a loop's trip count reads
    anything but integer parameters the function never assigns (a bound computed inside the
    nest), a loop sits under a branch or block, or the levels are not nested in order (a
    nest fission reordered)."""
    levels = nt.levels
    if any(len(levels[j][1]) >= len(levels[j + 1][1]) for j in range(len(levels) - 1)):
        return None
    f = asm.rv.facts
    known = {p.uid for p in asm.rv.fn.params
             if not p.type.is_memory and not p.type.real and not f.assigned.get(("var", p.uid))}
    L = ir.LONG

    def body(stmts, path) -> "ir.Expr | None | bool":
        total = None
        for k, st in enumerate(stmts):
            if isinstance(st, ir.Loop):
                c = asm.rv.canon.get(path + (k,))
                if c is None:
                    return False
                t = c.trips()
                if not ir.vars_in(t) <= known:
                    return False
                t = ir.Cast(t, L, "c")          # products in 64 bits
                inner = body(st.body.stmts, path + (k, 1))
                if inner is False:
                    return False
                term = t if inner is None else ir.Binary("*", t, inner, L)
                total = term if total is None else ir.Binary("+", total, term, L)
            elif any(isinstance(x, ir.Loop) for x in ir.walk_stmts(st)):
                return False
        return total

    loop, path, _ = levels[-1]
    w = body(loop.body.stmts, path + (1,))
    if w is False:
        return None
    for t in trips[width:len(levels)]:
        w = t if w is None else ir.Binary("*", t, w, L)
    return w if w is not None else ir.Const("1", L)


def _partial_sums(asm, partials, extents, K, g, c) -> tuple:
    """For each partial: (declarations before the chunk loop, the chunk's own copy at its
    start, what the chunk stores at its end, the combination after the loop)."""
    L = ir.LONG
    out, head, tail, after = [], [], [], []
    for pt, e in zip(partials, extents):
        elem = ir.Type(pt.type.base, 0, False, (), True)
        store = asm.names.fresh(names.SAVED_PREFIX, ir.Type(elem.base, vector=True, real=True))
        target = ir.Var(pt.name, pt.type, 0)
        if e is None:                       # a scalar adjoint: one partial per chunk
            out.append(ir.VectorDecl(store, K))
            head.append(ir.Decl(target, ir.Cast(ir.Const("0", ir.INT), elem, "fn")))
            tail.append(ir.Assign("=", ir.Index(store, c, elem), target))
            j = asm.names.fresh(names.SAVED_PREFIX, L)
            after.append(ir.Loop((ir.Decl(j, ir.Const("0", L)),), ir.Binary("<", j, K, ir.BOOL),
                                 (ir.Assign("+=", j, ir.Const("1", ir.INT)),),
                                 ir.Block((ir.Assign("+=", target, ir.Index(store, j, elem)),))))
            continue
        alias = asm.names.fresh(names.SAVED_PREFIX, pt.type)
        out.append(ir.Decl(alias, target))
        n = ir.Binary("*", K, e, L)
        out.append(ir.VectorDecl(store, ir.Cond(g, n, ir.Const("0", L), L)))
        mine = ir.Binary("+", ir.Raw(names.VECTOR_DATA, pt.type, (store,)),
                         ir.Binary("*", c, e, L), pt.type)
        head.append(ir.Decl(target, ir.Cond(g, mine, alias, pt.type)))
        comb = ir.ExprStmt(ir.Call(names.PAR_COMBINE,
                                   (alias, ir.Raw(names.VECTOR_DATA, pt.type, (store,)), K, e),
                                   VOID))
        after.append(ir.If(g, ir.Block((comb,))))
    return out, head, tail, after
