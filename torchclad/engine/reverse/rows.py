"""Rows an iteration owns: the assigning sweep zeroes them itself.

The sweep adds into its input adjoints, so the caller zero-fills them first: for a layernorm
over N rows of C values, a pass over N * C elements of d inp before the sweep starts (a
third of the backward's time at one thread). When every iteration n of a parallel reverse
loop touches d inp only within its own row, the elements [sigma * n, sigma * n + sigma),
the assigning sweep (generate.read_only_sweep) zeroes that row itself at the start of the
iteration, where the row then stays in cache for the additions that follow:

    for (long _t9 = 0; _t9 < (long)C; ++_t9) _d_inp[(long)C * n + _t9] = 0;

Over the iterations n = 0 .. N-1 those rows are the whole of [0, N * sigma): a buffer of
that many elements needs no zero fill (`extent`: N * sigma, a product of int parameters;
the caller compares it with the buffer's size, see Derivative.assign_extents).

Proved on the reverse of one iteration (parallel.py's scan), for an input adjoint that
parallel.py found private to an iteration (no two iterations touch one element):

- the nest's loops (one, or the n a `collapse(n)` covers) each run from 0 in steps of 1; n is
  the iteration's number, row-major over them (`b * T + t` for `collapse(2)` over b < B and
  t < T, each trip count an invariant);
- each access is `sigma * n + r`, with one loop-invariant sigma for all of them and r free
  of the nest's counters, and 0 <= r <= sigma - 1 over the ranges of the loops inside the
  iteration;
- sigma and the trip count are products of int parameters (which the caller checks are
  >= 0; `nonneg`), with no parameter as a divisor.

`placed` then checks the finished sweep, after every pass that moves statements: the zeroing
loop is still at the top level of the body of the nest's innermost loop, with no loop around
it but the nest's own (or the chunk loops of partial sums that stand for its parallel
levels, chunks.py), and every mention of the adjoint follows it there.
Anything else: the caller assembles the sweep again without zeroing, and zero-fills.

Where the first pass over the row writes each of its elements once, first_pass.py folds
the zeroing into it.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import ir, names
from ..analysis.affine import key
from ..analysis.bounds import add, const, frozen, mul
from . import parallel


@dataclass(frozen=True)
class Row:
    """An input adjoint an iteration owns a row of: the loop zeroing it (marked by its
    counter's name), the parameters whose product is the adjoint's extent, those the proof
    assumes non-negative, and the nest's counters (uids, outer first) with how many of them
    run in parallel (for `placed`)."""
    marker: str
    extent: tuple        # parameter uids, their product the number of elements
    nonneg: tuple        # parameter uids
    levels: tuple = ()
    width: int = 1


def owned(asm, body: list, levels: list, width: int, defs: dict, primal_of: dict,
          private) -> dict:
    """{adjoint name: (Row, the zeroing loop)} for the input adjoints among `private` (roots
    parallel.py found private to an iteration) whose rows the proof above shows owned;
    levels: the nest (parallel.Level, outer first), width: how many run in parallel."""
    if any(lv.step != 1 for lv in levels):
        return {}
    scan = parallel.scan(body, levels, defs, primal_of, parallel.taken(asm))
    if scan is None:
        return {}
    sp = scan.space
    trips = []
    for lv in levels:
        if sp.poly(lv.first) != {}:
            return {}
        t = sp.poly(ir.Binary("+", lv.last, ir.Const("1", ir.INT), ir.INT))
        if t is None or not sp.invariant(t):
            return {}
        trips.append(t)
    # the iteration's number n = sum_j c_j * stride_j, stride_j the product of the trip
    # counts of the levels inside level j
    strides = [const(1)]
    for t in reversed(trips[1:]):
        strides.insert(0, mul(strides[0], t))
    total = mul(strides[0], trips[0])
    params = {p.uid for p in asm.rv.fn.params}
    seeds = set(asm.read_only)
    inputs = {name for uid, name in asm.rv.adj_names.items() if uid in params} - seeds
    counters = [key(lv.var) for lv in levels]
    out = {}
    for root in sorted(set(private) & inputs):
        accs = [a for a in scan.accesses if a.root == root]
        got = _row(sp, accs, counters, strides, total, params)
        if got is None:
            continue
        sigma, extent, nonneg = got
        var = next((ir.root_var(a.target) for a in accs
                    if ir.root_var(a.target) is not None and
                    ir.root_var(a.target).name == root), None)
        if var is None:
            continue             # reached only through pointers into it
        z = asm.names.fresh(names.SAVED_PREFIX, ir.LONG)
        s = sp.to_expr(sigma)
        n = None
        for lv, st in zip(levels, strides):
            term = ir.Cast(lv.var, ir.LONG, "c")
            if st != const(1):
                term = ir.Binary("*", sp.to_expr(st), term, ir.LONG)
            n = term if n is None else ir.Binary("+", n, term, ir.LONG)
        at = ir.Binary("+", ir.Binary("*", s, n, ir.LONG), z, ir.LONG)
        zero = ir.Loop((ir.Decl(z, ir.Const("0", ir.LONG)),),
                       ir.Binary("<", z, s, ir.BOOL),
                       (ir.Assign("+=", z, ir.Const("1", ir.LONG)),),
                       ir.Block((ir.Assign("=", ir.Index(var, at, var.type.element()),
                                           ir.Const("0", var.type.element())),)))
        row = Row(z.name, extent, nonneg, tuple(lv.var.uid for lv in levels), width)
        out[root] = (row, zero)
    return out


def _row(sp, accs: list, counters: list, strides: list, total, params: set
         ) -> "tuple | None":
    """(sigma, extent parameter uids, non-negative parameter uids) when every access in accs
    lies in row n of width sigma (see the module docstring), else None."""
    if not accs:
        return None
    cs = [("c", c) for c in counters]
    sigma = None
    sp.used.clear()
    for a in accs:
        sp.alias = a.alias
        el = sp.element(a.target)
        sp.alias = {}
        if el is None:
            return None
        parts = [{} for _ in cs]
        r = {}
        for m, c in el[1].items():
            hits = [j for j, cj in enumerate(cs) if cj in m]
            if len(hits) > 1 or any(m.count(cs[j]) > 1 for j in hits):
                return None
            if hits:
                rest = list(m)
                rest.remove(cs[hits[0]])
                parts[hits[0]][tuple(rest)] = c
            else:
                r[m] = c
        s = parts[-1]
        if not s or not sp.invariant(s) or set(counters) & sp.coords_in(r):
            return None
        if any(frozen(p) != frozen(mul(s, st)) for p, st in zip(parts, strides)):
            return None          # not sigma times the iteration's number
        if sigma is None:
            sigma = s
        elif frozen(s) != frozen(sigma):
            return None
        lo, hi = sp.bound(r, False), sp.bound(r, True)
        if lo is None or hi is None or not sp.invariant(lo) or not sp.invariant(hi):
            return None
        if not sp.nonneg(lo) or not sp.nonneg(add(add(sigma, const(-1)), hi, -1)):
            return None
    extent = _monomial(mul(sigma, total), sp, params)
    # A parameter divisor would be safe to allow (the forward divided by it in the same
    # iteration), but the one built-in it admits, cross-entropy (`% C`, rows of 50304 logits),
    # measured a 2-5% slower backward at one thread with its rows zeroed in the sweep than
    # with the buffer zero-filled first, so the rule stays narrow.
    if extent is None or sp.divisors:
        return None
    sp.require(sigma)
    used = [sp.atoms[k].uid for k in sp.used if k in sp.atoms]
    if any(u not in params for u in used):
        return None
    return sigma, extent, tuple(sorted(set(used) | set(extent)))


def _monomial(p: dict, sp, params: set) -> "tuple | None":
    """The parameter uids whose product p is (coefficient 1), else None."""
    if len(p) != 1:
        return None
    (m, c), = p.items()
    if c != 1 or not m or any(f[0] != "a" for f in m):
        return None
    uids = tuple(sp.atoms[f[1]].uid for f in m)
    return uids if all(u in params for u in uids) else None


def mentions(s, root: str) -> int:
    """How many times statement s (nested statements included) names variable `root`."""
    return sum(1 for x in ir.walk_stmts(s) for e in ir.stmt_exprs(x)
               for y in ir.walk_expr(e) if isinstance(y, ir.Var) and y.name == root)


def placed(body: list, root: str, row: Row) -> bool:
    """Whether, in the finished sweep `body`, every mention of adjoint `root` follows a
    zeroing loop of `row` at the top level of the body of the nest's innermost loop (see the
    module docstring)."""
    seen = [0, 0]            # mentions after a zeroing loop, zeroing loops found

    def visit(stmts, loops: tuple) -> bool:
        for k, s in enumerate(stmts):
            if is_zeroing(s, row.marker):
                if not _rows_loops(loops, row) or any(mentions(x, root) for x in stmts[:k]):
                    return False
                seen[0] += sum(mentions(x, root) for x in stmts[k:])
                seen[1] += 1
                return True
            if isinstance(s, ir.Loop):
                if not visit(s.body.stmts, loops + (s,)):
                    return False
            elif isinstance(s, ir.Block):
                if not visit(s.stmts, loops):
                    return False
            elif isinstance(s, ir.If):
                if not visit(s.then.stmts, loops) or not visit(s.other.stmts, loops):
                    return False
        return True

    if not visit(body, ()):
        return False
    return seen[1] > 0 and seen[0] == sum(mentions(s, root) for s in body)


def is_zeroing(s, marker: str) -> bool:
    d = _counter(s) if isinstance(s, ir.Loop) else None
    return d is not None and d.var.name == marker


def _counter(loop: ir.Loop) -> "ir.Decl | None":
    """The declaration of a loop's one counter, None for another header."""
    d = loop.init[0] if len(loop.init) == 1 else None
    return d if isinstance(d, ir.Decl) else None


def _rows_loops(loops: tuple, row: Row) -> bool:
    """The loops around a zeroing loop are the nest's own, each once: the levels' loops
    (their counters), or, for partial sums, the chunk loop and its loop from `par_begin`
    standing for the parallel levels, then the serial levels' loops."""
    levels = row.levels
    chunk = _counter(loops[1]) if len(loops) >= 2 else None
    if chunk is not None and isinstance(chunk.init, ir.Call) and \
            ir.call_name(chunk.init.fn) == names.PAR_BEGIN:
        loops, levels = loops[2:], levels[row.width:]
    counters = [_counter(l) for l in loops]
    return len(loops) == len(levels) and all(
        d is not None and d.var.uid == u for d, u in zip(counters, levels))
