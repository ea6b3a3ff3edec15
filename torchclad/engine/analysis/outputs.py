"""Outputs written once: arrays the primal writes at most once per element and never reads.

The reverse of a store `out[e] = v` reads the seed element `_d_out[e]` and zeroes it, so
that an earlier store into the same element (reversed later) finds the seed of the value
that survived, not that of the one it overwrote. When the primal never reads `out` and
stores into each of its elements at most once, each seed element is read by one reverse
statement, once: nothing reads it after its reset, the resets are dead, and a sweep without
them only reads the seeds (the bridge can pass the caller's grads uncopied).

Proved here, for a set of output parameters:

- every mention of the array (through any pointer into it) is the base of a plain store
  `p[e] = v` / `*p = v`, or the initializer of a pointer declared into it
  (`T* o = out + n * C`); a read, a compound store, an argument of any call, a pointer
  reassigned, anything else fails;
- no two stores touch one element: for every ordered pair of store statements (a statement
  with itself across iterations of its loops), `Regions.conflict` shows the first cannot
  touch, before the second runs, an element the second writes. Two stores in the two branches
  of one `if` (`if (x > 0) out[i] = x; else out[i] = a * x;`) never run in the same iteration
  of the loops around that `if`: only their different iterations are compared.

`conflict` may answer with facts `P >= 0` over the integer symbols (the sign of a row
stride C it multiplies by). They are kept only when each is a polynomial with non-negative
coefficients over integer parameters: then "these parameters are >= 0" implies them, and
the caller tests that on entry (the bridge takes the variant only then).
"""
from __future__ import annotations

from .. import ir


def once_written(rv, seeds) -> "frozenset | None":
    """The uids of the integer parameters that must be >= 0 for the proof (see the module
    docstring) that every array in `seeds` (output parameters) is written at most once per
    element and never read, or None when it does not hold (or cannot be shown)."""
    regions = rv.facts.regions
    if regions is None or not seeds:
        return None
    keys = {rv.al.mem_key(p) for p in seeds}
    if not _only_stored(rv.fn, rv.al, keys):
        return None
    stores = [(p, k, regions.access(t)) for (p, k), t in rv.memory_writes.items() if k in keys]
    loops = tuple(rv.facts.loops)
    facts: set = set()
    for pa, ka, aa in stores:
        for pb, kb, ab in stores:
            if ka != kb:
                continue
            v = regions.conflict(pa, aa, pb, ab, (), loops, result=pa == pb,
                                 exclusive=_branches(pa, pb, rv.facts.ifs))
            if v is True:
                return None
            if v:
                facts |= v
    params = {p.uid for p in rv.fn.params}
    needed: set = set()
    for f in facts:
        for mono, coef in f:
            if coef < 0 or any(u not in params for u in mono):
                return None
            needed.update(mono)
    return frozenset(needed)


def _only_stored(fn: ir.Function, al, keys: set) -> bool:
    """Every mention of memory with one of `keys` is a plain store's base or a pointer
    declaration's base (see the module docstring)."""
    def mentions(e) -> int:
        n = 0
        for x in ir.walk_expr(e):
            if isinstance(x, ir.Var) and x.type.is_memory:
                r = al.roots.get(x.uid, x)
                if al.mem_key(r) in keys:
                    n += 1
        return n

    for s in ir.walk_stmts(fn.body):
        exprs = ir.stmt_exprs(s)
        if isinstance(s, ir.Assign) and not isinstance(s.target, ir.Var) and \
                mentions(s.target):
            t = s.target
            if s.op != "=" or not _plain_store(t) or mentions(t) != 1 or mentions(s.value):
                return False
            continue
        if isinstance(s, ir.Decl) and s.var.type.is_pointer and s.init is not None and \
                mentions(s.init):
            r = ir.root_var(s.init)
            if r is None or mentions(s.init) != 1 or mentions(r) != 1:
                return False
            continue
        if any(mentions(e) for e in exprs):
            return False
    return True


def _plain_store(t) -> bool:
    """t is `p[e]` or `*p` with p a variable (its element offsets are the index's)."""
    if isinstance(t, ir.Index):
        return isinstance(t.base, ir.Var)
    return isinstance(t, ir.Unary) and t.op == "*" and isinstance(t.operand, (ir.Var, ir.Binary))


def _branches(pa: tuple, pb: tuple, ifs: set) -> bool:
    """pa and pb lie in the two branches of one `if`."""
    n = 0
    while n < min(len(pa), len(pb)) and pa[n] == pb[n]:
        n += 1
    return n < min(len(pa), len(pb)) and pa[:n] in ifs and {pa[n], pb[n]} == {0, 1}
