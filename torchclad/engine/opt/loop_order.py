"""Reverse loops whose iterations are independent run in forward order.

The reverse of a canonical loop runs its iterations backwards,

    for (int i = hi; i-- > lo; ) { _d_x[i] += _d_y[i] * w[i]; _d_w0 += _d_y[i] * x[i]; }

which g++ vectorises only with a lane reversal (a permute) on every load and store, and
which keeps the loop from looking like the forward loop it came from. When no iteration's
reverse depends on another's, the order does not matter and this pass emits

    for (int i = lo; i < hi; i += 1) { ... the same body ... }

An iteration's reverse depends on another's through the tape (pops are LIFO), through values
restored into primal memory, or through an adjoint element one iteration reads or resets and
another updates. So the body (nested statements included) must satisfy:

- no tape operation, call of a generated or user function, return, break or continue, and no
  OpenMP pragma on the loop or inside it;
- a variable declared outside the body is only read, or only accumulated (`+=` / `-=`, never
  read in the body: a reduction);
- memory outside the body (an adjoint root and the pointer locals derived from it; primal
  memory the same way) is only read, or only accumulated into, or read, reset (`= 0`) and
  accumulated into only at one index `e` that takes a different value in every iteration
  (each iteration owns its element): `e` is a sum with exactly one term in the loop variable
  (`i` or `i * k`, `k` a nonzero integer literal), its other terms invariant in the loop;
- the loop bound is invariant in the loop.

In an innermost such loop, the floating scalars the body only accumulates into (reductions: the
adjoint of a value broadcast over the loop, `_d_mx += ...`) are summed in LANES fixed lanes
over blocks of LANES iterations (see `_in_lanes`): g++ does not vectorise a float reduction
without -ffast-math, and the fixed lanes keep one summation order for every vector width.

Accumulations then happen in a different order: the result differs in rounding only. Distinct
adjoint roots are assumed not to overlap, as in `promote.py`; the driver runs neither pass for
a callee some call site passes two pointers into one array.
"""
from __future__ import annotations


from .. import ir
from ..names import LANE_ARRAY, LANE_BLOCK, LANE_INDEX
from .promote import derived_pointers

LANES = 16


def forward_order(stmts, roots: set) -> list:
    """stmts: a generated function body; roots: names of its adjoint roots."""
    group = pointer_groups(stmts, roots)
    counter = [0]
    return [_stmt(s, group, counter) for s in stmts]


def pointer_groups(stmts, roots: set) -> dict:
    """name -> the adjoint roots it may point into (a root, or a pointer local derived from
    roots)."""
    group: dict = {}
    for root, names in derived_pointers(stmts, roots).items():
        for n in names:
            group.setdefault(n, set()).add(root)
    return group


def rewrite_loops(s, visit, inner_first: bool = False):
    """s with every loop nested in it replaced by `visit(loop)` where that is not None: outer
    loops first (a replaced loop is not entered), or inner loops first (visit sees the loop
    with its body already rewritten)."""
    if isinstance(s, ir.Block):
        return ir.Block(tuple(rewrite_loops(x, visit, inner_first) for x in s.stmts), s.loc)
    if isinstance(s, ir.If):
        return ir.If(s.cond, rewrite_loops(s.then, visit, inner_first),
                     rewrite_loops(s.other, visit, inner_first), s.loc)
    if not isinstance(s, ir.Loop):
        return s
    new = None if inner_first else visit(s)
    if new is not None:
        return new
    s = ir.Loop(s.init, s.cond, s.inc, rewrite_loops(s.body, visit, inner_first), s.loc,
                s.pragma, s.do_while)
    new = visit(s) if inner_first else None
    return s if new is None else new


def _stmt(s, group, counter):
    if isinstance(s, ir.Block):
        return ir.Block(tuple(_stmt(x, group, counter) for x in s.stmts), s.loc)
    if isinstance(s, ir.If):
        return ir.If(s.cond, _stmt(s.then, group, counter), _stmt(s.other, group, counter),
                     s.loc)
    if isinstance(s, ir.Loop):
        s = ir.Loop(s.init, s.cond, s.inc, _stmt(s.body, group, counter), s.loc, s.pragma,
                    s.do_while)
        bounds = reversed_bounds(s)
        scan = independent(s, bounds, group, owned=True) if bounds is not None else None
        if scan is not None:
            v, lo, hi = bounds
            reductions = _reductions(s, scan)
            if reductions:
                return _in_lanes(s, v, lo, hi, reductions, counter,
                                 simd=_lanes_share_nothing(scan, reductions))
            return ir.Loop((ir.Decl(v, lo),), ir.Binary("<", v, hi, ir.BOOL),
                           (_step(v),), s.body, s.loc)
    return s


def _step(v: ir.Var, n: str = "1") -> ir.Assign:
    return ir.Assign("+=", v, ir.Const(n, ir.INT))


def _reductions(loop: ir.Loop, scan: "_Scan") -> dict:
    """name -> Var of the floating scalars an innermost loop only accumulates into."""
    body = list(ir.walk_stmts(loop.body))
    if any(isinstance(x, ir.Loop) for x in body):
        return {}
    for x in body:
        for e in ir.stmt_exprs(x):
            for y in ir.walk_expr(e):
                if (isinstance(y, ir.Index) and isinstance(y.base, ir.Var) and y.base.type.dims
                        and y.base.type.dims[0].isdigit() and int(y.base.type.dims[0]) < LANES):
                    # indexes an array shorter than one block: the loop cannot run a block
                    # (and g++ warns about the block it sees running past the array)
                    return {}
    out = {}
    for x in body:
        if (isinstance(x, ir.Assign) and isinstance(x.target, ir.Var)
                and x.target.name in scan.acc_vars and x.target.type.is_real_scalar):
            out[x.target.name] = x.target
    return out


def _lanes_share_nothing(scan: "_Scan", reductions: dict) -> bool:
    """Whether the iterations of one block share nothing any of them writes: every scalar
    the body accumulates into has a lane, and every array it writes (accumulates into or
    resets) it reads and writes at one index that differs in every iteration. Then the block
    loop is `omp simd`: g++ vectorises it without run-time overlap checks -- which it would
    otherwise run for every block of 16 (layernorm's sweep: 170 -> 110 us at one thread) --
    under the assumption the passes already make that distinct adjoint buffers do not
    overlap, extended to: nor do they overlap primal memory."""
    if set(scan.acc_vars) - set(reductions):
        return False
    return all(scan._private(r) for r in scan.acc_mem | set(scan.reset_mem))


def _in_lanes(loop: ir.Loop, v: ir.Var, lo, hi, reductions: dict, counter,
              simd: bool = False) -> ir.Block:
    """The loop in blocks of LANES iterations, each reduction summed in LANES partial sums
    (lane j takes iterations j, j + LANES, ...; the vectoriser keeps them in registers), the
    remainder into the reduction itself, then the lanes added in order: one fixed summation
    order whatever the vector width the compiler picks.

        { T _lane0[16] = {}; int _ib0 = lo;
          for (; _ib0 + 16 <= hi; _ib0 += 16)
              [#pragma omp simd: see _lanes_share_nothing]
              for (int _j0 = 0; _j0 < 16; _j0 += 1) { int i = _ib0 + _j0; body: acc -> _lane0[_j0] }
          for (int i = _ib0; i < hi; i += 1) body
          for (int _j0 = 0; _j0 < 16; _j0 += 1) acc += _lane0[_j0]; }
    """
    k = counter[0]
    counter[0] += 1
    ib = ir.Var(f"{LANE_BLOCK}{k}", v.type, 0)     # the loop variable's type: compared with hi
    j = ir.Var(f"{LANE_INDEX}{k}", ir.INT, 0)
    lanes = {}
    for m, (name, var) in enumerate(sorted(reductions.items())):
        t = ir.Type(var.type.base, dims=(str(LANES),), real=True)
        lanes[name] = ir.Var(f"{LANE_ARRAY}{k}" + (f"_{m}" if m else ""), t, 0)
    lane_of = {name: ir.Index(lv, j, reductions[name].type) for name, lv in lanes.items()}

    def redirect(s):
        if isinstance(s, ir.Assign) and isinstance(s.target, ir.Var) and s.target.name in lane_of:
            return ir.Assign(s.op, lane_of[s.target.name], s.value, s.loc)
        if isinstance(s, ir.Block):
            return ir.Block(tuple(redirect(x) for x in s.stmts), s.loc)
        if isinstance(s, ir.If):
            return ir.If(s.cond, redirect(s.then), redirect(s.other), s.loc)
        return s

    width = ir.Const(str(LANES), ir.INT)
    blocked_body = ir.Block((ir.Decl(v, ir.Binary("+", ib, j, ir.INT)),)
                            + redirect(loop.body).stmts, loop.body.loc)
    inner = ir.Loop((ir.Decl(j, ir.Const("0", ir.INT)),), ir.Binary("<", j, width, ir.BOOL),
                    (_step(j),), blocked_body, loop.loc, "omp simd" if simd else "")
    blocks = ir.Loop((), ir.Binary("<=", ir.Binary("+", ib, width, ir.INT), hi, ir.BOOL),
                     (_step(ib, str(LANES)),), ir.Block((inner,)), loop.loc)
    rest = ir.Loop((ir.Decl(v, ib),), ir.Binary("<", v, hi, ir.BOOL), (_step(v),), loop.body,
                   loop.loc)
    fold = ir.Loop((ir.Decl(j, ir.Const("0", ir.INT)),), ir.Binary("<", j, width, ir.BOOL),
                   (_step(j),),
                   ir.Block(tuple(ir.Assign("+=", reductions[n], lane_of[n])
                                  for n in sorted(lanes))), loop.loc)
    decls = tuple(ir.Decl(lv, None, (ir.Const("{}", lv.type),)) for _, lv in sorted(lanes.items()))
    return ir.Block(decls + (ir.Decl(ib, lo), blocks, rest, fold), loop.loc)


def reversed_bounds(s: ir.Loop):
    """(v, lo, hi) of `for (int v = hi; v-- > lo; )`, else None."""
    if s.pragma or s.do_while or s.inc or len(s.init) != 1:
        return None
    head, cond = s.init[0], s.cond
    if not (isinstance(head, ir.Decl) and head.init is not None
            and ir.is_reversed_cond_of(cond, {head.var.name}) and cond.reads[0].uid == head.var.uid):
        return None
    return head.var, cond.reads[1], head.init


class _Reject(Exception):
    pass


def independent(loop: ir.Loop, bounds, group, owned: bool = False) -> "_Scan | None":
    """The scan of the loop's body if its iterations may run in any order, else None.
    owned: an array accumulated into may also be read and reset, where every access to it is
    at one index that differs in every iteration (loop distribution and interchange, which
    move statements between loops, keep the stricter rule: memory accumulated into is never
    read nor reset)."""
    v, lo, hi = bounds
    try:
        scan = _Scan(loop, v, group, owned)
    except _Reject:
        return None
    # the bound is re-read every iteration now: nothing the body writes may feed it
    for x in ir.walk_expr(hi):
        if not isinstance(x, (ir.Var, ir.Const, ir.Binary, ir.Unary, ir.Cast)):
            return None
        if isinstance(x, ir.Unary) and x.op in ("*", "&"):
            return None
        if isinstance(x, ir.Var) and (x.name in scan.local or x.name in scan.acc_vars):
            return None
    return scan if scan.ok() else None


class _Scan:
    """What one loop body does to everything declared outside it."""

    def __init__(self, loop: ir.Loop, v: ir.Var, group, owned: bool = False) -> None:
        self.v = v
        self.owned = owned
        self.group = group
        self.adjoint_roots = {r for rs in group.values() for r in rs}
        body = list(ir.walk_stmts(loop.body))
        self.local = {v.name} | {x.var.name for x in body if isinstance(x, ir.Decl)}
        self.points_to: dict = {}          # body-local pointer -> outer roots it may point into
        self.acc_vars: set = set()
        self.read_vars: set = set()
        self.acc_at: dict = {}             # root -> [(base name, index or None)] accumulated
        self.read_mem: dict = {}           # root -> [(base name, index or None)]
        self.reset_mem: dict = {}          # root -> [(base name, index)]
        for s in body:
            self._statement(s)

    @property
    def acc_mem(self) -> set:
        """The roots the body accumulates into."""
        return set(self.acc_at)

    # -- classification

    def roots_of(self, name: str) -> set:
        if name in self.local:
            return set(self.points_to.get(name, ()))
        return set(self.group.get(name, {name}))

    def _statement(self, s) -> None:
        if isinstance(s, (ir.TapePush, ir.TapeArray, ir.VectorDecl, ir.ExprStmt, ir.Return,
                          ir.Break, ir.Continue, ir.Switch, ir.Case)):
            raise _Reject
        if isinstance(s, ir.Loop) and s.pragma:
            raise _Reject
        if isinstance(s, ir.Decl):
            if s.static:
                raise _Reject
            for e in ir.stmt_exprs(s):
                self._read(e)
            if s.var.type.is_pointer and s.init is not None:
                self.points_to[s.var.name] = {
                    r for x in ir.walk_expr(s.init) if isinstance(x, ir.Var)
                    for r in self.roots_of(x.name)}
            return
        if isinstance(s, ir.Assign):
            self._assign(s)
            return
        for e in ir.stmt_exprs(s):
            self._read(e)

    def _assign(self, s: ir.Assign) -> None:
        t = s.target
        accumulate = s.op in ("+=", "-=")
        if isinstance(t, ir.Var):
            if t.name in self.local:
                self._read(s.value)
                if t.type.is_pointer:            # a body-local pointer moved: widen its roots
                    self.points_to.setdefault(t.name, set()).update(
                        r for x in ir.walk_expr(s.value) if isinstance(x, ir.Var)
                        for r in self.roots_of(x.name))
                return
            if not accumulate:
                raise _Reject
            self.acc_vars.add(t.name)
            self._read(s.value)
            return
        if isinstance(t, ir.Index):
            base = ir.root_var(t.base)
            if base is None:
                raise _Reject
            self._read(t.index)
            if t.base is not base:
                self._read(t.base)
            roots = self.roots_of(base.name)
            if base.name in self.local and not roots:
                self._read(s.value)          # a local array of the body
                return
            if accumulate:
                for r in roots:
                    self.acc_at.setdefault(r, []).append(
                        (base.name, t.index if t.base is base else None))
            elif (s.op == "=" and ir.is_null(s.value) and t.base is base and roots
                    and roots <= self.adjoint_roots):
                for r in roots:
                    self.reset_mem.setdefault(r, []).append((base.name, t.index))
            else:
                raise _Reject
            self._read(s.value)
            return
        if isinstance(t, ir.Unary) and t.op == "*" and accumulate:
            base = ir.root_var(t.operand)
            if base is None:
                raise _Reject
            self._read(t.operand)
            for r in self.roots_of(base.name):
                self.acc_at.setdefault(r, []).append((base.name, None))
            self._read(s.value)
            return
        raise _Reject

    def _read(self, e) -> None:
        for x in ir.walk_expr(e):
            if isinstance(x, ir.TapePop):
                raise _Reject
            if isinstance(x, ir.Call) and x.user:
                raise _Reject
            if isinstance(x, ir.Raw) and x.assigns:
                # the one verbatim expression with an effect allowed: a nested reversed loop's
                # condition, which decrements that loop's own variable
                if not ir.is_reversed_cond_of(x, self.local):
                    raise _Reject
            if isinstance(x, ir.Var):
                self.read_vars.add(x.name)
            elif isinstance(x, ir.Index) or (isinstance(x, ir.Unary) and x.op == "*"):
                inner = x.base if isinstance(x, ir.Index) else x.operand
                base = ir.root_var(inner)
                if base is None:
                    raise _Reject
                index = x.index if (isinstance(x, ir.Index) and inner is base) else None
                for r in self.roots_of(base.name):
                    self.read_mem.setdefault(r, []).append((base.name, index))

    # -- the verdict

    def ok(self) -> bool:
        if self.acc_vars & self.read_vars:
            return False
        if not self.owned and self.acc_mem & (set(self.read_mem) | set(self.reset_mem)):
            return False
        return all(self._private(r) for r in set(self.reset_mem) |
                   {r for r in self.acc_mem if r in self.read_mem})

    def _private(self, r) -> bool:
        """Whether every access of root r in the body (reads, resets, accumulations) is at one
        index that differs in every iteration: each iteration then owns its element."""
        seen = set(self.reset_mem.get(r, ())) | set(self.read_mem.get(r, ())) | \
            set(self.acc_at.get(r, ()))
        if len(seen) != 1:
            return False
        _, index = next(iter(seen))
        return index is not None and self._injective(index)

    def _injective(self, e) -> bool:
        terms: list = []
        additive_terms(e, terms)
        moving = []
        for t in terms:
            names = {x.name for x in ir.walk_expr(t) if isinstance(x, ir.Var)}
            if any(not isinstance(x, (ir.Var, ir.Const, ir.Binary, ir.Unary, ir.Cast))
                   or (isinstance(x, ir.Unary) and x.op in ("*", "&"))
                   for x in ir.walk_expr(t)):
                return False
            if names & self.local or names & self.acc_vars:
                moving.append((t, names))
        if len(moving) != 1:
            return False
        t, names = moving[0]
        if names != {self.v.name}:
            return False
        return _is_var(t, self.v) or _scaled_var(t, self.v)


def additive_terms(e, out: list) -> None:
    """The additive terms of e (signs dropped: injectivity does not depend on them)."""
    if isinstance(e, ir.Binary) and e.op in ("+", "-"):
        additive_terms(e.lhs, out)
        additive_terms(e.rhs, out)
    elif isinstance(e, ir.Unary) and e.op in ("-", "+"):
        additive_terms(e.operand, out)
    elif isinstance(e, ir.Cast) and not e.type.is_pointer:
        additive_terms(e.operand, out)
    else:
        out.append(e)


def _is_var(e, v: ir.Var) -> bool:
    return isinstance(e, ir.Var) and e.name == v.name


def _scaled_var(e, v: ir.Var) -> bool:
    if not (isinstance(e, ir.Binary) and e.op == "*"):
        return False
    for a, b in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
        if _is_var(a, v) and isinstance(b, ir.Const):
            try:
                return int(b.text.rstrip("uUlL"), 0) != 0
            except ValueError:
                return False
    return False
