"""Loop distribution (fission) of a reverse nest, the nest of sums interchanged.

The reverse of a product over rows (llm.c's `matmul_forward_naive`, an `omp parallel for
collapse(2)` over (b, t)) is one nest whose innermost loop adds into two kinds of adjoint:

    for (b, t) {                                              // the outer levels
        int bt = b * T + t;
        for (int o = OC; o-- > 0; ) {                         // the inner loop O
            float _d_val = float(0);
            float _r_d0 = _d_out[bt * OC + o];                // the seed element: read,
            _d_out[bt * OC + o] = 0;                          // then reset
            _d_val += _r_d0;
            for (int i = C; i-- > 0; ) {
                _d_inp[bt * C + i] += _d_val * weight[o * C + i];   // moves with (b, t)
                _d_weight[o * C + i] += inp[bt * C + i] * _d_val;   // a sum over (b, t)
            }
            if (bias != nullptr) { _d_bias[o] += _d_val; }          // a sum over (b, t)
        }
    }

Every (b, t) streams all of `weight` and reads and writes all of `_d_weight`. `distribute`
splits the nest in two, each keeping the statements of one kind and recomputing the cheap
scalars they need (`_d_val` from `_d_out`):

    for (b, t) { int bt = ...; for (o) { _d_val = ...; for (i) _d_inp[...] += ...; } }
    for (o) for (b, t) { int bt = ...; _d_val = ...; _d_out[...] = 0;
                         for (i) _d_weight[o * C + i] += ...; if (bias) _d_bias[o] += ...; }

and the second runs with O outside (its `swapped` part): the row `_d_weight[o * C + :]` stays
in cache while (b, t) runs, and the nest streams `inp` instead. The kinds are decided by the
index of each accumulated element: a *sum* over the outer levels when it does not depend on
their counters (nor on a local computed from them) and depends on O's; *kept* otherwise. An
adjoint array accumulated in both kinds refuses the split, and so does a nest with no sum
made in a loop inside O: the gain is a row of sums reused across the outer levels, and with
O innermost (an elementwise layer's bias, `_d_bias[i]`) O outside would stride the rows.

Where. A parallel nest (`omp parallel for`, `collapse(n)`: its loops are the outer levels)
is split by reverse/omp.py as it plans the nest, so that each split nest gets a parallel plan
of its own; `fission`, a pass run before interchange.py, splits serial nests (a chain of
perfectly nested reversed loops, the outer levels, around the body).

Legality. The iterations of the outer levels must only share memory they read or accumulate
into: reverse/parallel.py's proof at the nest's whole width (for a parallel nest, its plan);
when that proof assumes integers non-negative, the split nests run only when a run-time test
of it passes, else the nest as it was. This module shows the same of O's iterations (`loop_order.independent`: O's body only reads
memory it does not write, only accumulates into memory nothing in it reads, and reads and
resets other memory only at one element that differs in every iteration) and checks:

- the iteration body is scalar declarations (cheap: no call) then O, whose bounds do not
  depend on the outer counters or those declarations, and those declarations touch no memory
  that O accumulates into or resets;
- every statement of O's body is a declaration or assignment of a local of the body, an
  accumulation into memory, or a reset (`= 0`) of the seed element; no variable declared
  outside the body is written;
- a reset is a top-level statement of O's body and every read of that memory comes in a
  top-level statement before it: it goes into the last nest only, which runs after the
  other nest has read the element, and reads it itself before resetting it;
- a local that both nests need is computed without calls (recomputing it is cheap).

Then every (outer, O) iteration only touches memory that is read-only, accumulated only, or
its own seed element, so statements of different kinds commute and the iterations of each
nest may run in any order: the split nests compute the same sums, each element's in the same
order as before (the nest of sums adds in the outer levels' order for every element).
Where anything is not shown, `distribute` returns None and the nest stays as it was.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .. import ir
from ..analysis.affine import key
from ..reverse import parallel
from .loop_order import independent, pointer_groups, reversed_bounds, rewrite_loops


@dataclass(frozen=True)
class Split:
    """The iteration body of a reverse nest, distributed: `kept` (None when empty) runs in
    the nest's order first; then O runs outside the outer levels, with `prefix` followed by
    `inner`'s body as the body of the innermost level."""
    kept: "tuple | None"
    prefix: tuple
    inner: ir.Loop


class _No(Exception):
    pass


def distribute(body, counters: set, group: dict) -> "Split | None":
    """body: the reverse of one iteration of the outer levels, whose counters are named
    `counters`; group: pointer name -> the adjoint roots it may point into."""
    try:
        return _distribute(list(body), counters, group)
    except _No:
        return None


def _distribute(body: list, counters: set, group: dict) -> "Split | None":
    if not body or not isinstance(body[-1], ir.Loop):
        return None
    prefix, inner = body[:-1], body[-1]
    bounds = reversed_bounds(inner)
    if bounds is None:
        return None
    for d in prefix:
        if not (isinstance(d, ir.Decl) and d.init is not None and not d.static
                and not d.init_list and not d.var.type.dims and _cheap(d)):
            return None
    declared = {d.var.name for d in prefix}
    if (ir.names_in(bounds[1]) | ir.names_in(bounds[2])) & (counters | declared):
        return None
    scan = independent(inner, bounds, group)
    if scan is None or scan.acc_vars or not scan.acc_mem <= scan.adjoint_roots:
        return None
    resets = set(scan.reset_mem)
    if any(_read_roots(d, scan) & (scan.acc_mem | resets) for d in prefix):
        return None
    leaves = list(_leaves(inner.body, ()))
    kinds = {p: _kind(s, scan) for p, s, _, _ in leaves}
    local = [(("prefix", k), d.var.name, d) for k, d in enumerate(prefix)] + \
        [(p, kinds[p][1], s) for p, s, _, _ in leaves if kinds[p][0] == "local"]
    with_outer = _moving(counters, local)
    with_inner = _moving({bounds[0].name}, local)
    cls, by_root, rows = {}, {}, False
    for p, s, _, looped in leaves:
        if kinds[p][0] != "acc":
            continue
        names = ir.names_in(s.target)
        c = "sum" if not names & with_outer and names & with_inner else "kept"
        cls[p] = c
        rows = rows or (c == "sum" and looped)
        for r in kinds[p][1]:
            if by_root.setdefault(r, c) != c:
                return None                   # one array accumulated in both kinds
    if not rows:
        return None       # no sum in a loop inside O: outside, O would stride the rows
    _check_resets(inner.body, leaves, kinds, scan)
    enclosing = {p: names for p, _, names, _ in leaves}
    reset_paths = {p for p, _, _, _ in leaves if kinds[p][0] == "reset"}
    leaf = {p: s for p, s, _, _ in leaves}
    sums = _keep({p for p, c in cls.items() if c == "sum"} | reset_paths, local, leaf, enclosing)
    kept_set = _keep({p for p, c in cls.items() if c == "kept"}, local, leaf, enclosing) \
        if "kept" in cls.values() else set()
    for p, _, s in local:
        if p in sums and p in kept_set and not _cheap(s):
            return None                       # both nests would compute it
    kept = None
    if kept_set:
        kept = tuple(d for k, d in enumerate(prefix) if ("prefix", k) in kept_set) + \
            (replace(inner, body=ir.Block(_build(inner.body, (), kept_set), inner.body.loc)),)
    swapped = replace(inner, body=ir.Block(_build(inner.body, (), sums), inner.body.loc))
    return Split(kept, tuple(d for k, d in enumerate(prefix) if ("prefix", k) in sums), swapped)


def fission(stmts, roots: set) -> list:
    """The pass over serial reverse nests (a parallel one is split by reverse/omp.py as it is
    planned): stmts, a generated function body; roots, the names of its adjoint roots."""
    group = pointer_groups(stmts, roots)
    return [rewrite_loops(s, lambda loop: _serial(loop, group)) for s in stmts]


def _serial(top: ir.Loop, group) -> "ir.Stmt | None":
    """A chain of perfectly nested reversed loops from `top` whose innermost body
    `distribute` splits, as the two nests; when the proof that the chain's iterations only
    share memory they read or accumulate into (reverse/parallel.py, as for a parallel loop)
    assumes integers non-negative, that is tested at run time (else the nest as it was)."""
    levels, loop = [], top
    while (b := reversed_bounds(loop)) is not None:
        levels.append((loop, b))
        body = list(loop.body.stmts)
        split = distribute(body, {v.name for _, (v, _, _) in levels}, group)
        if split is not None:
            marks = [parallel.Level(v, lo, ir.Binary("-", hi, ir.Const("1", ir.INT), ir.INT), 1)
                     for _, (v, lo, hi) in levels]
            plan = parallel.analyse(body, marks, {key(m.var) for m in marks}, {}, {})
            if not isinstance(plan, parallel.Plan):
                return None
            nests = ([_chain(levels, split.kept)] if split.kept is not None else []) + \
                [replace(split.inner, body=ir.Block((_chain(levels, split.prefix +
                                                            split.inner.body.stmts),)))]
            if plan.guard is None:
                return ir.Block(tuple(nests), top.loc)
            return ir.If(plan.guard, ir.Block(tuple(nests)), ir.Block((top,)), top.loc)
        if len(body) != 1 or not isinstance(body[0], ir.Loop):
            return None
        loop = body[0]
    return None


def _chain(levels, body) -> ir.Loop:
    """The chain's loops, with their own headers, around body."""
    inner = tuple(body)
    for loop, _ in reversed(levels):
        inner = (replace(loop, body=ir.Block(inner, loop.body.loc)),)
    return inner[0]


def _leaves(block: ir.Block, path: tuple, outer=frozenset(), looped=False):
    """(path, statement, names of the enclosing headers, in a loop) of every statement of
    block that is not a block, an if or a loop; a path is its position in the tree."""
    for k, s in enumerate(block.stmts):
        p = path + (k,)
        if isinstance(s, ir.Block):
            yield from _leaves(s, p, outer, looped)
        elif isinstance(s, ir.If):
            inner = outer | ir.names_in(s.cond)
            yield from _leaves(s.then, p + (0,), inner, looped)
            yield from _leaves(s.other, p + (1,), inner, looped)
        elif isinstance(s, ir.Loop):
            head = set(outer)
            for x in s.init + s.inc:
                head |= ir.stmt_names(x)
            if s.cond is not None:
                head |= ir.names_in(s.cond)
            yield from _leaves(s.body, p, frozenset(head), True)
        elif not isinstance(s, ir.Comment):
            yield p, s, outer, looped


def _build(block: ir.Block, path: tuple, keep: set) -> tuple:
    """block with only the leaves at the paths in `keep` (and what holds them)."""
    out = []
    for k, s in enumerate(block.stmts):
        p = path + (k,)
        if isinstance(s, ir.Block):
            inner = _build(s, p, keep)
            if inner:
                out.append(ir.Block(inner, s.loc))
        elif isinstance(s, ir.If):
            then, other = _build(s.then, p + (0,), keep), _build(s.other, p + (1,), keep)
            if then or other:
                out.append(ir.If(s.cond, ir.Block(then, s.then.loc), ir.Block(other, s.other.loc),
                                 s.loc))
        elif isinstance(s, ir.Loop):
            inner = _build(s.body, p, keep)
            if inner:
                out.append(replace(s, body=ir.Block(inner, s.body.loc)))
        elif p in keep:
            out.append(s)
    return tuple(out)


def _kind(s, scan) -> tuple:
    """("local", name) | ("acc", roots) | ("reset", roots) of one leaf of O's body."""
    if isinstance(s, ir.Decl) and not s.static:
        return "local", s.var.name
    if not isinstance(s, ir.Assign):
        raise _No
    t = s.target
    if isinstance(t, ir.Var):
        if t.name not in scan.local:
            raise _No
        return "local", t.name
    base = ir.root_var(t)
    if base is None:
        raise _No
    roots = scan.roots_of(base.name)
    if base.name in scan.local and not roots:
        return "local", base.name             # an array of the body
    if s.op in ("+=", "-=") and roots:
        return "acc", frozenset(roots)
    if s.op == "=" and ir.is_null(s.value) and roots and roots <= set(scan.reset_mem):
        return "reset", frozenset(roots)
    raise _No


def _check_resets(block: ir.Block, leaves, kinds, scan) -> None:
    """A reset is a top-level statement of O's body; reads of its memory come before it."""
    for p, s, _, _ in leaves:
        if kinds[p][0] != "reset":
            continue
        if len(p) != 1:
            raise _No
        for other in block.stmts[p[0] + 1:]:
            if _read_roots(other, scan) & kinds[p][1]:
                raise _No


def _read_roots(s, scan) -> set:
    """The memory roots a statement (nested ones included) reads."""
    out = set()
    for x in ir.walk_stmts(s):
        exprs = ir.stmt_exprs(x)
        if isinstance(x, ir.Assign) and x.op == "=" and isinstance(x.target, ir.Index):
            exprs = (x.target.index, x.value) + \
                ((x.target.base,) if not isinstance(x.target.base, ir.Var) else ())
        for e in exprs:
            for y in ir.walk_expr(e):
                if isinstance(y, ir.Index) or (isinstance(y, ir.Unary) and y.op == "*"):
                    r = ir.root_var(y)
                    if r is None:
                        raise _No
                    out |= scan.roots_of(r.name)
    return out


def _moving(seeds: set, local: list) -> set:
    """seeds and the locals computed from them, transitively."""
    out = set(seeds)
    changed = True
    while changed:
        changed = False
        for _, name, s in local:
            if name not in out and ir.stmt_names(s) & out:
                out.add(name)
                changed = True
    return out


def _keep(chosen: set, local: list, leaf: dict, enclosing: dict) -> set:
    """chosen and every computation of a local they need, transitively (every statement
    writing a needed local; the prefix's declarations as ("prefix", k))."""
    keep = set(chosen)
    needed = set()
    for p in chosen:
        needed |= ir.stmt_names(leaf[p]) | enclosing[p]
    changed = True
    while changed:
        changed = False
        for p, name, s in local:
            if p not in keep and name in needed:
                keep.add(p)
                needed |= ir.stmt_names(s) | enclosing.get(p, frozenset())
                changed = True
    return keep


def _cheap(s) -> bool:
    return not any(isinstance(y, (ir.Call, ir.Raw, ir.TapePop))
                   for e in ir.stmt_exprs(s) for y in ir.walk_expr(e))
