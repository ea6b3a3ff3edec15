"""OpenMP loops in the two sweeps.

A `#pragma omp parallel for` loop (with `collapse(n)`: the n perfectly nested loops it
names) whose loops are canonical (`for (int i = a; i < b; i += c)`, any positive literal
step, up or down) keeps its pragma in the recording forward. What an iteration records goes
where another iteration cannot disturb it:

- nothing recorded: the loop as written;
- a fixed set of scalars and fixed-size local arrays saved at the end of each iteration:
  per-iteration slots (`std::vector`s indexed by the iteration number k, pushed whole after
  the loop);
- anything else (loop counts, locals saved in inner blocks, a callee's records): each
  iteration records on its thread's own tape, and `torchclad::IterRecords` (runtime
  parallel.h) keeps the offset of iteration k's record, then moves all records to the shared
  tape in iteration order.

The reverse runs the iterations in forward order, each with its own record (a slot read, or
`IterRecords::replay(k)` as the iteration's `_tape`). Whether it runs them in parallel is
parallel.py's question, asked for the whole collapsed nest and then for its outer loops
only (the inner ones serial inside each parallel iteration):

- private adjoints only: the nest with `#pragma omp parallel for [collapse(m)] if(assumptions)`;
- adjoints every iteration adds into: a fixed number of chunks of consecutive iterations
  (from the sizes only), each adding into its own zeroed partial sums, then
  `torchclad::par_combine` in chunk order: the same bits for any number of threads
  (chunks.py);
- otherwise the loop runs serially, and a warning says why.

A reverse adding both into adjoints private to an iteration and into sums over iterations
(a dense layer's d inp, d weight) is split by opt/fission.py first (`_distributed`).

A pragma the engine cannot keep (a loop that is not canonical, a collapse over loops that
are not perfectly nested, `omp for` outside a parallel region, a clause whose variables the
records would get wrong) is dropped with a warning naming the loop and the reason.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from .. import ir, names
from ..analysis.affine import key
from ..opt import fission
from ..opt.loop_order import pointer_groups
from . import parallel, rows as rows_mod, slots as slot_mod
from .chunks import chunked, product, rebuild, spell_or_empty, trip_decls
from .transform import TAPE

#: what a reverse loop may keep of the forward's clauses
_CARRIED = ("schedule", "num_threads", "proc_bind", "if")
#: clauses whose variables change across iterations in ways per-iteration records miss
_SHARED = ("reduction", "lastprivate", "linear", "ordered", "copyin")
_CLAUSE = re.compile(r"([A-Za-z_]\w*)\s*(\((?:[^()]|\([^()]*\))*\))?")
RECORDS = ir.Type("torchclad::IterRecords")
TAPE_REF = ir.Type("torchclad::Tape&")
VOID = ir.VOID


@dataclass(frozen=True)
class Nest:
    """The loops a parallel pragma covers (outer first), as (loop, path, CanonLoop)."""
    levels: tuple
    kind: str                 # "parallel for", "parallel for simd" or "simd"
    clauses: tuple            # ((name, "(args)" or ""), ...) as written
    mode: str = "none"        # how iterations record: "none", "slots" or "records"
    saved: tuple = ()         # the locals kept in slots

    @property
    def loc(self):
        return self.levels[0][0].loc

    def carried(self) -> str:
        return "".join(f" {n}{a}" for n, a in self.clauses if n in _CARRIED and n != "if")

    def user_if(self) -> str:
        return next((a[1:-1] for n, a in self.clauses if n == "if"), "")


def parse(pragma: str) -> "tuple[str, tuple]":
    words = pragma.split()
    for kind in ("parallel for simd", "parallel for", "simd", "for"):
        k = kind.split()
        if words[1:1 + len(k)] == k:
            rest = " ".join(words[1 + len(k):])
            return kind, tuple((m.group(1), m.group(2) or "") for m in _CLAUSE.finditer(rest))
    return "", ()


def nest(asm, s: ir.Loop, p: tuple) -> "Nest | str":
    """The nest a pragma covers, or why the engine cannot keep the pragma."""
    kind, clauses = parse(s.pragma)
    if kind == "for":
        return ("'#pragma omp for' outside an 'omp parallel' region runs on one thread; "
                "write '#pragma omp parallel for'")
    if not kind:
        return f"'#pragma {s.pragma}' is not a loop construct the engine reads"
    n = 1
    for name, arg in clauses:
        if name == "collapse":
            m = re.fullmatch(r"\(\s*(\d+)\s*\)", arg)
            if not m or int(m.group(1)) < 1:
                return f"collapse{arg} needs a positive integer literal"
            n = int(m.group(1))
    levels = []
    loop, path = s, p
    for j in range(n):
        canon = asm.rv.canon.get(path)
        if canon is None:
            return ("the loop is not canonical: the engine needs `for (int i = a; i < b; "
                    "i += c)` (or counting down), c a positive integer literal, a const integer "
                    "global initialised with one or an integer local initialised with one "
                    "and never assigned, with i, a and b unchanged in the body")
        if asm.rec.plan(path).saved:
            return "the loop's header declares locals the reverse needs saved"
        levels.append((loop, path, canon))
        if j < n - 1:
            inner = loop.body.stmts
            if len(inner) != 1 or not isinstance(inner[0], ir.Loop):
                return f"collapse({n}) needs {n} perfectly nested loops"
            loop, path = inner[0], path + (1, 0)
    counters = {c.var.uid for _, _, c in levels}
    for _, _, c in levels[1:]:
        if (ir.vars_in(c.lo) | ir.vars_in(c.hi)) & counters:
            return f"collapse({n}) over loops whose bounds depend on an outer counter"
    nt = Nest(tuple(levels), kind, clauses)
    mode, saved = recording(asm, nt)
    if mode != "none" and kind == "simd":
        return "the iterations of an 'omp simd' loop record values for the reverse"
    shared = [name for name, _ in clauses if name in _SHARED]
    if mode != "none" and shared:
        return f"the iterations record values for the reverse and the pragma has '{shared[0]}'"
    return replace(nt, mode=mode, saved=tuple(saved))


# ---------------------------------------------------------------------- recording
def _tape_ops(body) -> int:
    return sum(1 for st in body for x in ir.walk_stmts(st)
               if isinstance(x, (ir.TapePush, ir.TapeArray)) or
               (isinstance(x, (ir.ExprStmt, ir.Decl, ir.Assign)) and
                names.TAPE in ir.stmt_names(x)))


def recording(asm, nt: Nest) -> "tuple[str, list]":
    """How iterations record: ("none" | "slots" | "records", the saved locals for slots)."""
    loop, path, _ = nt.levels[-1]
    body = asm.fwd_block(loop.body, path + (1,))
    ops = _tape_ops(body)
    if ops == 0:
        return "none", []
    saved = list(asm.rec.plan(path + (1,)).saved)
    if ops == len(saved) and all(slot_mod.width(d) for d in saved):
        return "slots", saved
    return "records", []



def number(nt: Nest, levels: tuple, trips: list) -> ir.Expr:
    """The iteration number of the current counters of `levels` (row-major)."""
    k = None
    for (_, _, c), n in zip(levels, trips):
        kj = c.number()
        k = kj if k is None else ir.Binary("+", ir.Binary("*", k, n, ir.LONG), kj, ir.LONG)
    return k


def forward(asm, nt: Nest) -> list:
    """The recording forward of the nest."""
    mode, saved = nt.mode, list(nt.saved)
    loop, path, _ = nt.levels[-1]
    outer = nt.levels[0][0]
    if mode == "none":
        body = asm.fwd_block(loop.body, path + (1,))
        return [rebuild(nt.levels, body, outer.pragma)]
    slots = slot_mod.slot_vars(asm, saved) if mode == "slots" else []
    trips, decls = trip_decls(asm, nt.levels)
    total = trips[0] if len(trips) == 1 else asm.names.fresh(names.SAVED_PREFIX, ir.LONG)
    if len(trips) > 1:
        decls.append(ir.Decl(total, product(trips)))
    k = number(nt, nt.levels, trips)
    body = asm.fwd_block(loop.body, path + (1,))
    pragma = outer.pragma
    if mode == "slots":
        body = [st for st in body if not isinstance(st, (ir.TapePush, ir.TapeArray))]
        for v, d in zip(slots, saved):
            w = slot_mod.width(d)
            if not d.var.type.dims:
                body.append(ir.Assign("=", ir.Index(v, k, v.type.element()), d.var))
            else:
                at = ir.Binary("*", k, ir.Const(str(w), ir.LONG), ir.LONG)
                body.append(slot_mod.copy(asm, v, at, d.var, None, w))
        sizes = [slot_mod.scaled(total, slot_mod.width(d)) for d in saved]
        out = decls + [ir.VectorDecl(v, n) for v, n in zip(slots, sizes)]
        out.append(rebuild(nt.levels, body, pragma))
        out += [ir.TapeArray(v, n, False) for v, n in zip(slots, sizes)]
        return [ir.Block(tuple(out), outer.loc)]
    rec = asm.names.fresh(names.SAVED_PREFIX, RECORDS)
    if any(n == "num_threads" for n, _ in nt.clauses):
        asm.note(nt.loc, "'num_threads' is dropped from the recording forward (its per-thread "
                         "records are sized by the default team)")
        pragma = "omp " + nt.kind + "".join(f" {n}{a}" for n, a in nt.clauses
                                            if n != "num_threads")
    shadow = ir.Decl(ir.Var(names.TAPE, TAPE_REF, 0),
                     ir.Raw("{0}.record({1})", TAPE_REF, (rec, k), assigns=True))
    out = decls + [ir.Decl(rec, ir.Raw("torchclad::IterRecords({0})", RECORDS, (total,)))]
    out.append(rebuild(nt.levels, [shadow] + body, pragma))
    out.append(ir.ExprStmt(ir.Raw("{0}.save({1})", VOID, (rec, TAPE), assigns=True)))
    return [ir.Block(tuple(out), outer.loc)]


# ---------------------------------------------------------------------- reverse
def _outer_defs(asm, p: tuple) -> dict:
    """Integer and pointer locals declared once, outside the nest at p, never reassigned."""
    f = asm.rv.facts
    out = {}
    for path, _, d in f.decls:
        t = d.var.type
        if path[:len(p)] == p or d.init is None or (t.real and not t.is_pointer) or t.dims:
            continue
        key = ("var", d.var.uid)
        if f.assigned.get(key) or key in f.address_taken:
            continue
        out[d.var.uid] = d.init
    return out


def _primal_of(asm) -> dict:
    rv = asm.rv
    by_uid = {p.uid: p.name for p in rv.fn.params}
    by_uid.update({d.var.uid: d.var.name for _, _, d in rv.facts.decls})
    return {a: by_uid[u] for u, a in rv.adj_names.items() if u in by_uid}



def _levels(nt: Nest) -> list:
    out = []
    for _, _, c in nt.levels:
        if c.up:
            out.append(parallel.Level(c.var, c.lo, ir.Binary("-", c.hi, ir.Const("1", ir.INT),
                                                             ir.INT), c.step))
        else:
            out.append(parallel.Level(c.var, c.hi, c.lo, c.step))
    return out


def reverse(asm, nt: Nest) -> list:
    loop, path, _ = nt.levels[-1]
    body = list(asm.rev_block(loop.body, path + (1,)))
    split = _distributed(asm, nt, body) if nt.mode == "none" else None
    if split is None:
        return _whole(asm, nt, body)
    nests, guard = split
    if guard is None:
        return nests
    # the proofs behind the split assume integers non-negative: else the nest as it was
    return [ir.If(guard, ir.Block(tuple(nests)), ir.Block(tuple(_whole(asm, nt, body))), nt.loc)]


def _whole(asm, nt: Nest, body: list) -> list:
    """The reverse of the nest in one piece, given the reverse of one iteration."""
    mode, saved = nt.mode, list(nt.saved)
    outer = nt.levels[0][0]
    slots = slot_mod.slot_vars(asm, saved) if mode == "slots" else []
    trips, decls = trip_decls(asm, nt.levels) if mode != "none" or len(nt.levels) > 1 \
        else ([], [])
    if mode == "slots":
        body = slot_mod.from_slots(asm, body, number(nt, nt.levels, trips), slots, saved)
    total = None
    if trips:
        total = trips[0] if len(trips) == 1 else asm.names.fresh(names.SAVED_PREFIX, ir.LONG)
        if len(trips) > 1:
            decls.append(ir.Decl(total, product(trips)))
    rec = None
    if mode == "slots":
        sizes = [slot_mod.scaled(total, slot_mod.width(d)) for d in saved]
        decls += [ir.VectorDecl(v, n) for v, n in zip(slots, sizes)]
        decls += [ir.TapeArray(v, n, True) for v, n in reversed(list(zip(slots, sizes)))]
    elif mode == "records":
        rec = asm.names.fresh(names.SAVED_PREFIX, RECORDS)
        decls.append(ir.Decl(rec, ir.Raw("torchclad::IterRecords::load({0})", RECORDS, (TAPE,),
                                         assigns=True)))
    plan, width, refusal = _plan(asm, nt, body)
    if asm.owned_rows and plan is not None:
        body = _zero_rows(asm, nt, body, plan, width) + body
    if rec is not None:
        shadow = ir.Decl(ir.Var(names.TAPE, TAPE_REF, 0),
                         ir.Raw("{0}.replay({1})", TAPE_REF,
                                (rec, number(nt, nt.levels, trips)), assigns=True))
        body = [shadow] + body
    if plan is None:
        asm.note(nt.loc, f"'#pragma {outer.pragma}': the reverse loop runs serially: "
                         f"{refusal}")
        nest_loop = rebuild(nt.levels, body, "")
    elif plan.partials:
        return [ir.Block(tuple(decls + chunked(asm, nt, width, trips, total, body, plan)),
                         outer.loc)]
    else:
        nest_loop = rebuild(nt.levels, body, _pragma(nt, width, plan))
    return [ir.Block(tuple(decls + [nest_loop]), outer.loc)] if decls else [nest_loop]


def _zero_rows(asm, nt: Nest, body: list, plan, width: int) -> list:
    """The loops zeroing the rows of the input adjoints an iteration owns (rows.py), for the
    assigning sweep; noted in asm.rows."""
    got = rows_mod.owned(asm, body, _levels(nt), width, _outer_defs(asm, nt.levels[0][1]),
                         _primal_of(asm), plan.private)
    for root, (row, _) in got.items():
        asm.rows[root] = row
    return [zero for _, zero in got.values()]


def _distributed(asm, nt: Nest, body: list) -> "tuple | None":
    """(the nests opt/fission.py splits the reverse into, each planned on its own, and the
    condition its proof assumes) or None. Only for a nest whose iterations the parallel plan
    shows independent at its whole width (fission.py's precondition)."""
    if nt.kind == "simd" or asm.overlaps:
        return None
    last, path, _ = nt.levels[-1]
    stmts = last.body.stmts
    k = len(stmts) - 1
    canon = asm.rv.canon.get(path + (1, k))
    if k < 0 or not isinstance(stmts[k], ir.Loop) or stmts[k].pragma or canon is None \
            or canon.step != 1 or any(isinstance(x, ir.Loop) for x in stmts[:k]):
        return None
    roots = set(asm.rv.adj_names.values())
    split = fission.distribute(body, {c.var.name for _, _, c in nt.levels},
                               pointer_groups(body, roots))
    if split is None or split.inner.init[0].var.uid != canon.var.uid:
        return None
    plan, width, _ = _plan(asm, nt, body)
    if plan is None or width != len(nt.levels):
        return None
    swapped = replace(nt, levels=((stmts[k], path + (1, k), canon),) + nt.levels)
    sums = list(split.prefix) + list(split.inner.body.stmts)
    planned = _plan(asm, swapped, sums, path=nt.levels[0][1])
    if planned[0] is None:
        return None
    kept = _nest(asm, nt, list(split.kept), _plan(asm, nt, list(split.kept))) \
        if split.kept is not None else []
    return kept + _nest(asm, swapped, sums, planned), plan.guard


def _nest(asm, nt: Nest, body: list, planned) -> list:
    """A nest whose iterations record nothing, as its plan says."""
    plan, width, refusal = planned
    if plan is None:
        asm.note(nt.loc, f"'#pragma {nt.levels[0][0].pragma}': the reverse loop runs "
                         f"serially: {refusal}")
        return [rebuild(nt.levels, body, "")]
    if plan.partials:
        return [ir.Block(tuple(chunked(asm, nt, width, [], None, body, plan)), nt.loc)]
    return [rebuild(nt.levels, body, _pragma(nt, width, plan))]


def _plan(asm, nt: Nest, body, path=None) -> tuple:
    """(Plan, how many outer loops of the nest run in parallel, refusal) -- the widest;
    path: where the nest's outer loop is (default: its first level's)."""
    levels = _levels(nt)
    defs = _outer_defs(asm, nt.levels[0][1] if path is None else path)
    primal_of = _primal_of(asm)
    refusal = ""
    for width in range(len(levels), 0, -1):
        iters = {key(lv.var) for lv in levels[:width]}
        plan = parallel.analyse(body, levels, iters, defs, primal_of, parallel.taken(asm))
        clash = next((g for g in asm.overlaps if len(g & set(plan.private)) > 1), None) \
            if isinstance(plan, parallel.Plan) else None
        if clash is not None:
            a, b = sorted(clash & set(plan.private))[:2]
            return None, 0, (f"a call passes '{a}' and '{b}' pointers into one array, so "
                             "two iterations' adjoints may share memory")
        if isinstance(plan, parallel.Plan):
            if nt.kind == "simd" and (plan.partials or plan.guard is not None):
                return None, 0, "an 'omp simd' reverse loop needs every adjoint private " \
                                "to an iteration"
            return plan, width, ""
        refusal = refusal or plan.reason
    return None, 0, refusal


def _pragma(nt: Nest, width: int, plan) -> str:
    words = "omp " + ("simd" if nt.kind == "simd" else
                      "parallel for simd" if nt.kind == "parallel for simd" else "parallel for")
    if width > 1:
        words += f" collapse({width})"
    words += nt.carried()
    conds = [c for c in (nt.user_if(), spell_or_empty(plan.guard)) if c]
    if conds:
        words += f" if({' && '.join(conds)})"
    return words

