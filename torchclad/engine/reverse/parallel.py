"""May the reverse of an `omp parallel for` loop run its iterations in parallel?

The forward pragma promises that the iterations' primal writes are independent: an element
one iteration writes, no other iteration reads or writes. So the reverse's restores of primal
memory and the adjoints of what an iteration wrote stay within the iteration. What the
promise does not cover: the reverse adds into the adjoints of what the forward *read*, and
every row reads the same weights. `analyse` looks at the reverse of one iteration (after
the iteration's tape has been made its own, see omp.py) and answers with a `Plan`, or a
`Refusal` naming the reason in C++ words:

- every adjoint array the body writes is checked access pair by access pair
  (analysis/affine.py): an index in one iteration may equal an index in another only when
  the two iterations are the same. Then the array needs nothing;
- an adjoint the body only adds into, at indices that do not depend on the parallel
  counters (`_d_weight[i]` of a layernorm, `*_d_a` of a scalar parameter, a scalar adjoint
  declared outside the loop), gets partial sums: the plan lists it with the number of
  elements its indices reach (from 0), and omp.py gives each fixed chunk of iterations its
  own zeroed copy, added into the adjoint in chunk order afterwards;
- anything else keeps the loop serial: an index the engine cannot bound (it depends on data,
  `idx[n] * C + i`), an adjoint read where another iteration may write it, a write to a
  variable declared outside the loop, a call of another function's sweep, a `return`.

The proofs assume the integers they read are non-negative (divisors positive); `Plan.guard`
is that condition, checked at run time (serial when it fails).
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import ir, lastwrite, names
from ..analysis.affine import Coord, Space, add, const, frozen, key
from ..emit.cpp import spell


@dataclass(frozen=True)
class Partial:
    """An adjoint the iterations all add into: `name` of `type` (a pointer: `extent` elements
    from index 0; a scalar: extent None)."""
    name: str
    type: ir.Type
    extent: "ir.Expr | None"


@dataclass(frozen=True)
class Plan:
    partials: tuple = ()
    guard: "ir.Expr | None" = None
    private: tuple = ()       # adjoint roots the iterations touch directly (not partial sums)


@dataclass(frozen=True)
class Refusal:
    reason: str


@dataclass(frozen=True)
class Level:
    """One loop of the parallel nest: its counter's values lie in [first, last] (inclusive),
    `step` apart."""
    var: ir.Var
    first: ir.Expr
    last: ir.Expr
    step: int


class _Serial(Exception):
    pass


def _is_adjoint(v) -> bool:
    return isinstance(v, ir.Var) and v.uid == 0 and (names.is_adjoint(v.name) or
                                                      v.name.startswith("_dl_"))


class _Access:
    def __init__(self, root: str, target, how: str, depth_coords: tuple, loc, alias: dict):
        self.root, self.target, self.how, self.coords, self.loc = \
            root, target, how, depth_coords, loc
        self.alias = alias      # the counters read through narrower coordinates here


class _Scan:
    """One walk over the reverse body: its loops (coordinates), the locals it defines, and
    every access to adjoint memory or to variables declared outside it."""

    def __init__(self, body, levels, outer_defs: dict, primal_of: dict, taken=None):
        self.primal_of = primal_of
        self.space = Space()
        for uid, init in outer_defs.items():
            self.space.defs[uid] = init
        self.declared = {x.var.name for s in body for x in ir.walk_stmts(s)
                         if isinstance(x, (ir.Decl, ir.VectorDecl))}
        self.accesses: list = []
        self.scalar_acc: dict = {}        # outer scalar adjoint -> its type (only added into)
        self.scalar_other: set = set()
        # a loop's step of its own counter (`i -= 2`) does not make the counter vary: _stmt
        # reads the counter as a coordinate where _header knows the loop, else as varying
        steps = {id(a) for s in body for x in ir.walk_stmts(s) if isinstance(x, ir.Loop)
                 and len(x.init) == 1 and isinstance(x.init[0], ir.Decl)
                 for a in x.inc if isinstance(a, ir.Assign) and isinstance(a.target, ir.Var)
                 and key(a.target) == key(x.init[0].var)}
        assigned = {}
        for s in body:
            for x in ir.walk_stmts(s):
                if isinstance(x, ir.Assign) and isinstance(x.target, ir.Var) and \
                        id(x) not in steps:
                    assigned.setdefault(key(x.target), []).append(x)
        self._counters: set = set()
        self._n_guards = 0
        self._levels = {key(lv.var) for lv in levels}
        for depth, lv in enumerate(levels):
            self._coord(lv.var, lv.first, lv.last, lv.step, depth)
        for s in body:
            self._decls(s, assigned)
        for s in body:
            self._taken(s, taken or {}, assigned, len(levels))
        for s in body:
            self._stmt(s, tuple(key(lv.var) for lv in levels))

    # ------------------------------------------------------------------ structure
    def _coord(self, v, lo, hi, step, depth):
        sp = self.space
        p_lo, p_hi = sp.poly(lo), sp.poly(hi)
        if p_lo is None or p_hi is None:
            sp.varying.add(key(v))
            return
        sp.coords[key(v)] = Coord(frozen(p_lo), frozen(p_hi), step, depth)
        self._counters.add(key(v))

    def _decls(self, s, assigned):
        for x in ir.walk_stmts(s):
            if isinstance(x, ir.Decl) and (not x.var.type.real or x.var.type.is_pointer) and \
                    x.init is not None and not x.var.type.dims and key(x.var) not in assigned:
                self.space.defs[key(x.var)] = x.init
            elif isinstance(x, ir.Decl) and key(x.var) in assigned:
                self.space.varying.add(key(x.var))

    def _taken(self, s, taken: dict, assigned: dict, depth: int):
        """The index of a running max (uid -> the forward loop it copies a counter of,
        `taken`) declared in the body and not assigned there (the reverse pops it) is read as
        a coordinate over that counter's range, one deeper than the loops around its
        declaration."""
        got = counter_range(taken[s.var.uid]) if isinstance(s, ir.Decl) and \
            s.var.uid in taken and key(s.var) not in assigned else None
        if got is not None:
            _, first, last, step = got
            self.space.defs.pop(key(s.var), None)
            self._coord(s.var, first, last, step, depth)
            if key(s.var) in self.space.coords:
                self.space.taken.add(key(s.var))
        elif isinstance(s, ir.Loop):
            for x in s.body.stmts:
                self._taken(x, taken, assigned, depth + 1)
        elif isinstance(s, ir.Block):
            for x in s.stmts:
                self._taken(x, taken, assigned, depth)
        elif isinstance(s, ir.If):
            for x in s.then.stmts + s.other.stmts:
                self._taken(x, taken, assigned, depth)

    def _header(self, loop: ir.Loop, depth: int) -> "ir.Var | None":
        """Register a loop's counter as a coordinate when its header is one of the forms the
        engine emits; return it."""
        got = counter_range(loop)
        if got is None:
            return None
        v, first, last, step = got
        self._coord(v, first, last, step, depth)
        return v

    def _guarded(self, cond, then: ir.Block, coords: tuple) -> tuple:
        """The coordinates inside `if (cond) then`: a counter of an enclosing loop that cond
        compares with a polynomial (`j < rest`, `&&` of such) is read there through a
        coordinate of its own whose range that bound narrows (`hi = rest - 1`), so that the
        accesses the guard keeps in bounds are known to be. Not when the branch assigns it."""
        if isinstance(cond, ir.Binary) and cond.op == "&&":
            return self._guarded(cond.rhs, then, self._guarded(cond.lhs, then, coords))
        if not (isinstance(cond, ir.Binary) and cond.op in ("<", "<=", ">", ">=")):
            return coords
        sp = self.space
        current = lambda x: sp.alias.get(key(x), key(x)) if isinstance(x, ir.Var) else None
        op, v, other = cond.op, cond.lhs, cond.rhs
        if current(v) not in coords:
            op, v, other = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[op], cond.rhs, cond.lhs
        k = current(v)
        if k not in coords:
            return coords
        if any(isinstance(x, ir.Assign) and isinstance(x.target, ir.Var) and
               key(x.target) == key(v) for t in then.stmts for x in ir.walk_stmts(t)):
            return coords
        bound = sp.poly(other)
        if bound is None or k not in sp.coords or k in self._levels:
            return coords      # (a parallel counter keeps its own key: the proofs follow it)
        co = sp.coords[k]
        lo, hi = co.lo, co.hi
        if op in ("<", "<="):
            hi = frozen(add(bound, const(-1 if op == "<" else 0)))
        else:
            lo = frozen(add(bound, const(1 if op == ">" else 0)))
        self._n_guards += 1
        k2 = -self._n_guards           # a key no variable has (uids are positive)
        sp.coords[k2] = Coord(lo, hi, co.step, co.depth)
        sp.alias[key(v)] = k2
        return tuple(k2 if c == k else c for c in coords)

    # ------------------------------------------------------------------ accesses
    def _stmt(self, s, coords: tuple):
        if isinstance(s, ir.Loop):
            v = self._header(s, len(coords))
            if v is None:
                for x in s.init:
                    if isinstance(x, ir.Decl):
                        self.space.varying.add(key(x.var))
            inner = coords + ((key(v),) if v is not None else ())
            for x in s.init:
                if isinstance(x, ir.Decl) and x.init is not None:
                    self._exprs(x.init, inner, x)
            if s.cond is not None:
                self._exprs(s.cond, inner, s)
            for x in s.body.stmts:
                self._stmt(x, inner)
            for x in s.inc:
                if v is None or not (isinstance(x, ir.Assign) and isinstance(x.target, ir.Var)
                                     and key(x.target) == key(v)):
                    self._stmt(x, inner)
            return
        if isinstance(s, ir.Block):
            for x in s.stmts:
                self._stmt(x, coords)
            return
        if isinstance(s, ir.If):
            self._exprs(s.cond, coords, s)
            saved = dict(self.space.alias)
            inner = self._guarded(s.cond, s.then, coords)
            for x in s.then.stmts:
                self._stmt(x, inner)
            self.space.alias = saved
            for x in s.other.stmts:
                self._stmt(x, coords)
            return
        if isinstance(s, (ir.Return, ir.Break, ir.Continue, ir.Switch, ir.Case)):
            raise _Serial("it returns or jumps out of an iteration")
        if isinstance(s, ir.ExprStmt):
            calls = [x for x in ir.walk_expr(s.expr) if isinstance(x, ir.Call)]
            if calls:
                raise _Serial(f"it calls '{ir.call_name(calls[0].fn)}', whose adjoint "
                              "writes the engine does not check")
        if isinstance(s, ir.Assign):
            self._assign(s, coords)
            return
        for e in ir.stmt_exprs(s):
            self._exprs(e, coords, s)

    def _assign(self, s: ir.Assign, coords):
        t = s.target
        acc = s.op in ("+=", "-=")
        if isinstance(t, ir.Var):
            if t.name not in self.declared:
                if _is_adjoint(t) and not t.type.is_memory:
                    if acc:
                        self.scalar_acc[t.name] = t.type
                    else:
                        self.scalar_other.add(t.name)
                elif key(t) not in self._counters:
                    raise _Serial(f"it writes '{t.name}', declared outside the loop"
                                  + _line(s))
        else:
            root = ir.root_var(t)
            if root is not None and self._shared_adjoint(root):
                self.accesses.append(_Access(self._root_name(t), t, "acc" if acc else "write",
                                             coords, s, dict(self.space.alias)))
            if isinstance(t, ir.Index):
                self._exprs(t.index, coords, s)
            elif isinstance(t, ir.Unary):
                self._exprs(t.operand, coords, s)
        self._exprs(s.value, coords, s)

    def _shared_adjoint(self, v: ir.Var) -> bool:
        """Adjoint memory declared outside the body (a local adjoint array of the body is
        the iteration's own)."""
        if v.name in self.declared and not self._adjoint_pointer(v):
            return False
        return _is_adjoint(v) or self._adjoint_pointer(v)

    def _adjoint_pointer(self, v: ir.Var) -> bool:
        """A pointer local of the body derived from an adjoint root."""
        init = self.space.defs.get(key(v))
        if init is None or not v.type.is_pointer:
            return False
        r = ir.root_var(init)
        return r is not None and (_is_adjoint(r) or self._adjoint_pointer(r))

    def _root_name(self, e) -> str:
        el = self.space.element(e)
        return el[0] if el is not None else ir.root_var(e).name

    def _exprs(self, e, coords, s):
        for x in ir.walk_expr(e):
            if isinstance(x, ir.Call) and (x.user or names.split_generated(
                    ir.call_name(x.fn)) is not None):
                raise _Serial(f"it calls '{ir.call_name(x.fn)}', whose adjoint writes the "
                              "engine does not check" + _line(s))
            if isinstance(x, (ir.Index,)) or (isinstance(x, ir.Unary) and x.op == "*"):
                r = ir.root_var(x)
                if r is not None and self._shared_adjoint(r):
                    self.accesses.append(_Access(self._root_name(x), x, "read", coords, s,
                                                 dict(self.space.alias)))
            if _is_adjoint(x) and not x.type.is_memory and x.name not in self.declared:
                self.scalar_other.add(x.name)


def counter_range(loop: ir.Loop) -> "tuple | None":
    """(counter, first, last, step) of a loop whose header is one of the forms the engine
    emits -- `for (i = a; i < b; i += s)` (or `<=`), counting down with `-=` and `>` / `>=`,
    the reverse's `for (i = b; i-- > a; )` -- the range inclusive, s a literal; else None."""
    if len(loop.init) != 1 or not isinstance(loop.init[0], ir.Decl) or loop.cond is None:
        return None
    v, a = loop.init[0].var, loop.init[0].init
    c = loop.cond
    if a is None:
        return None
    same = lambda x: isinstance(x, ir.Var) and key(x) == key(v)
    if ir.is_reversed_cond_of(c, {v.name}) and same(c.reads[0]) and not loop.inc:
        return v, c.reads[1], ir.Binary("-", a, _one(), ir.INT), 1
    if not (isinstance(c, ir.Binary) and same(c.lhs) and len(loop.inc) == 1
            and isinstance(loop.inc[0], ir.Assign) and same(loop.inc[0].target)):
        return None
    inc = loop.inc[0]
    step = _literal(inc.value)
    if step is None:
        return None
    b = c.rhs
    if inc.op == "+=" and c.op in ("<", "<="):
        return v, a, (ir.Binary("-", b, _one(), ir.INT) if c.op == "<" else b), step
    if inc.op == "-=" and c.op in (">", ">="):
        return v, (ir.Binary("+", b, _one(), ir.INT) if c.op == ">" else b), a, step
    return None


def _one() -> ir.Const:
    return ir.Const("1", ir.INT)


def _literal(e) -> "int | None":
    if isinstance(e, ir.Const) and not e.type.real and e.text.rstrip("uUlL").isdigit():
        n = int(e.text.rstrip("uUlL"))
        return n if n > 0 else None
    return None


def _line(s) -> str:
    loc = getattr(s, "loc", None)
    return f" (line {loc.line})" if loc is not None and loc.line else ""


def taken(asm) -> dict:
    """The loops of the function's running-max indices (lastwrite.index_loops), once per
    function."""
    got = asm.rv.taken_loops
    if got is None:
        got = asm.rv.taken_loops = lastwrite.index_loops(asm.rv.fn.body)
    return got


def scan(body, levels, outer_defs: dict, primal_of: dict, taken=None) -> "_Scan | None":
    """The coordinates and adjoint accesses of the reverse of one iteration (`space`,
    `accesses`: root, target, how, alias), as `analyse` reads them; None where it refuses the
    body's form. For rows.py."""
    try:
        return _Scan(body, levels, outer_defs, primal_of, taken)
    except _Serial:
        return None


def analyse(body, levels, iters: set, outer_defs: dict, primal_of: dict,
            taken=None) -> "Plan | Refusal":
    """body: the reverse of one iteration; levels: the nest (outer first); iters: uids of the
    counters that run in parallel; outer_defs: uid -> initializer of integer and pointer
    locals defined once before the loop; primal_of: adjoint name -> primal name; taken: uid
    of a running max's index -> the loop whose counter it copies (lastwrite.index_loops)."""
    try:
        scan = _Scan(body, levels, outer_defs, primal_of, taken)
    except _Serial as e:
        return Refusal(str(e))
    sp = scan.space
    by_root: dict = {}
    for a in scan.accesses:
        by_root.setdefault(a.root, []).append(a)
    partials, private = [], []
    try:
        for root in sorted(by_root):
            accs = by_root[root]
            if all(a.how == "read" for a in accs):
                private.append(root)
                continue
            p = _array(sp, root, accs, iters, primal_of)
            if p is not None:
                partials.append(p)
            else:
                private.append(root)
    except _Serial as e:
        return Refusal(str(e))
    for name in sorted(scan.scalar_acc):
        if name in scan.scalar_other:
            return Refusal(f"it reads the adjoint '{name}' that every iteration adds into")
        partials.append(Partial(name, scan.scalar_acc[name], None))
    guard = None
    for c in sp.assumed():
        guard = c if guard is None else ir.Binary("&&", guard, c, ir.BOOL)
    return Plan(tuple(partials), guard, tuple(private))


def _what(root: str, primal_of: dict) -> str:
    p = primal_of.get(root)
    return f"the adjoint of '{p}' ('{root}')" if p else f"'{root}'"


def _array(sp: Space, root: str, accs: list, iters: set, primal_of: dict) -> "Partial | None":
    polys = []
    for a in accs:
        sp.alias = a.alias
        el = sp.element(a.target)
        sp.alias = {}
        if el is None:
            raise _Serial(f"{_what(root, primal_of)} is {_verb(a)} at '{spell(a.target)}', "
                          "an index the engine cannot bound (it depends on values loaded "
                          "from memory or changed in the loop)" + _line(a.loc))
        polys.append(el[1])
    # only added into at indices free of the parallel counters: partial sums, unless a
    # counter in them has a range that follows a parallel one (`for (i = b * 64; i < e; i++)
    # d x[i] += ...`) and the engine shows the iterations' elements disjoint
    added = all(a.how == "acc" for a in accs) and \
        not any(sp.coords_in(p) & iters for p in polys)
    if added and not any(sp.reaches(p) & iters for p in polys):
        return _partial(sp, root, accs, polys, primal_of)
    # an index that reads a running max's index is read where its loop ran (see Space.taken)
    facts_of = [sp.facts(set(a.coords) | (sp.coords_in(p) & sp.taken))
                for a, p in zip(accs, polys)]
    for i, a in enumerate(accs):
        for j in range(i, len(accs)):
            b = accs[j]
            if a.how == "read" and b.how == "read":
                continue
            facts = tuple(sorted(set(facts_of[i]) | set(facts_of[j]), key=repr))
            if not sp.meet_only_within(polys[i], polys[j], iters, facts):
                if added:
                    return _partial(sp, root, accs, polys, primal_of)
                if sp.assuming(lambda: sp.meet_only_within(polys[i], polys[j], iters, facts)):
                    continue           # the condition it took is tested before the loop
                other = "" if i == j else f" and {_verb(b)} at '{spell(b.target)}'"
                raise _Serial(f"{_what(root, primal_of)} is {_verb(a)} at "
                              f"'{spell(a.target)}'{other}{_line(a.loc)}: the engine cannot "
                              "show that two iterations never touch the same element")
    return None


def _verb(a: _Access) -> str:
    return {"acc": "added to", "write": "written", "read": "read"}[a.how]


def _partial(sp: Space, root: str, accs, polys, primal_of) -> Partial:
    ends = []
    for a, p in zip(accs, polys):
        lo, hi = sp.bound(p, False), sp.bound(p, True)
        if lo is None or hi is None or not sp.nonneg(lo):
            raise _Serial(f"{_what(root, primal_of)} is added to at '{spell(a.target)}', "
                          "whose range the engine cannot bound" + _line(a.loc))
        sp.require(hi)
        end = frozen(add(hi, const(1)))
        if end not in ends:
            ends.append(end)
    extent = None
    for end in ends:
        e = sp.to_expr(dict(end))
        extent = e if extent is None else ir.Call("std::max<long>", (extent, e), ir.LONG)
    t = accs[0].target
    base = ir.root_var(t)
    typ = ir.Type(t.type.value().base, 1, False, (), True) if base is not None else t.type
    return Partial(root, typ, extent)
