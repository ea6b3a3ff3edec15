"""Canonical loops: `for (int i = lo; i < hi; i += c)` (or counting down, `i -= c`), c a
positive integer literal (1 for `i++`), with i, lo and hi unchanged by the body; an unrolled
loop's `i + k < n` (k a literal, n signed) is read as `i < n - k`. Such a loop
needs no iteration count on the tape: its reverse runs `for (i = hi; i-- > lo; )` (a step of
one) or over the iteration numbers k = n-1 .. 0 with i = lo + k * c, and its counter is the
reverse's own. A blocked loop's bound may be `std::min(a, b)` / `std::max(a, b)`, and
`i < a && i < b` is read as `i < (a < b ? a : b)`."""
from __future__ import annotations

import re
from dataclasses import dataclass

from .. import ir
from ..analysis.effects import call_writes


@dataclass(frozen=True)
class CanonLoop:
    var: ir.Var
    lo: ir.Expr
    hi: ir.Expr          # exclusive upper bound for up loops, inclusive lower for down loops
    up: bool
    step: int = 1        # the counter moves by this much per iteration (> 0)

    def trips(self) -> ir.Expr:
        """The number of iterations (0 when the loop does not run), a long."""
        L = ir.LONG
        one = self.step == 1
        if self.up:
            span = self.hi if is_zero_literal(self.lo) else ir.Binary("-", self.hi, self.lo, L)
            runs = ir.Binary(">", self.hi, self.lo, ir.BOOL)
            n = span if one else ir.Binary("/", ir.Binary("+", span, _lit(self.step - 1), L),
                                           _lit(self.step), L)
        else:
            span = ir.Binary("-", self.lo, self.hi, L)
            runs = ir.Binary(">=", self.lo, self.hi, ir.BOOL)
            n = ir.Binary("+", span if one else ir.Binary("/", span, _lit(self.step), L),
                          _lit(1), L)
        return ir.Cond(runs, n, ir.Const("0", L), L)

    def hi_running(self) -> ir.Expr:
        """hi wherever the loop runs an iteration: for `hi = (n > k ? n - k : 0)` (an unsigned
        unrolled bound, see _unrolled) from a literal lo >= 0, `n - k` -- the loop only runs
        when hi > lo >= 0, i.e. when the condition held -- else hi itself."""
        h = self.hi
        if self.up and isinstance(h, ir.Cond) and is_zero_literal(h.other) and \
                _nonneg_literal(self.lo):
            return h.then
        return h

    def number(self) -> ir.Expr:
        """The iteration number k (0, 1, ...) of the counter's current value, a long."""
        d = ir.Binary("-", self.var, self.lo, ir.LONG) if self.up else \
            ir.Binary("-", self.lo, self.var, ir.LONG)
        if self.up and is_zero_literal(self.lo):
            d = self.var
        return d if self.step == 1 else ir.Binary("/", d, _lit(self.step), ir.LONG)

    def value(self, k: ir.Expr) -> ir.Expr:
        """The counter's value in iteration number k (the counter's type)."""
        t = self.var.type
        off = k if self.step == 1 else ir.Binary("*", k, _lit(self.step), ir.LONG)
        if self.up and is_zero_literal(self.lo):
            return ir.Cast(off, t, "static")
        return ir.Cast(ir.Binary("+" if self.up else "-", self.lo, off, ir.LONG), t, "static")


def is_zero_literal(e) -> bool:
    """The literal 0."""
    return isinstance(e, ir.Const) and e.text == "0"


def _nonneg_literal(e) -> bool:
    """An integer literal >= 0 (`0`, `2`, `4L`)."""
    return is_zero_literal(e) or step_of(e) is not None


def _lit(n: int) -> ir.Const:
    return ir.Const(str(n), ir.LONG)


def step_of(e) -> "int | None":
    """The positive value of an integer literal step (`1`, `8`, `4L`), else None."""
    if not isinstance(e, ir.Const) or e.type.real:
        return None
    m = re.fullmatch(r"(\d+)[uUlL]*", e.text)
    return int(m.group(1)) if m and int(m.group(1)) > 0 else None


# Integer spellings whose arithmetic cannot wrap in a well-defined program: n - k stays below
# n, so `i + k < n` and `i < n - k` agree (for an unsigned n < k the second would wrap).
_SIGNED = frozenset({"int", "long", "long long", "short", "signed char", "ptrdiff_t",
                     "std::ptrdiff_t", "int64_t", "int32_t", "std::int64_t", "std::int32_t"})


def is_signed(t: ir.Type) -> bool:
    """A signed integer scalar (a spelling of _SIGNED): counting it below its loop's lower bound
    cannot wrap around."""
    return t.ptr == 0 and not t.dims and t.base in _SIGNED


_UNSIGNED_NAMES = frozenset({"size_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t"})


def is_unsigned(t: ir.Type) -> bool:
    """An unsigned integer scalar by its spelling (`unsigned ...`, size_t, uintN_t, with or
    without std::): it is never below 0. Neither this nor is_signed: a typedef it cannot see
    through."""
    base = t.base[5:] if t.base.startswith("std::") else t.base
    return t.ptr == 0 and not t.dims and (base.startswith("unsigned") or base in _UNSIGNED_NAMES)


def _unrolled(c: ir.Binary, v: ir.Var, lo: ir.Expr) -> ir.Binary:
    """`i + k < n` (or `<=`), k a literal and i, n signed, as `i < n - k`. With an unsigned n
    (n - k would wrap for n < k), `i + k < n` from a literal lo >= 0 (i never negative, so the
    sum is the mathematical one) as `i < (n > k ? n - k : 0)`. Else c itself."""
    lhs = c.lhs
    if not (c.op in ("<", "<=") and isinstance(lhs, ir.Binary) and lhs.op == "+" and
            isinstance(lhs.lhs, ir.Var) and lhs.lhs.uid == v.uid):
        return c
    if step_of(lhs.rhs) is None:
        return c
    types = (v.type, lhs.type, c.rhs.type)
    if all(is_signed(t) for t in types):
        return ir.Binary(c.op, lhs.lhs, ir.Binary("-", c.rhs, lhs.rhs, c.rhs.type), c.type)
    n, t = c.rhs, c.rhs.type
    if c.op == "<" and is_unsigned(t) and all(is_signed(x) or is_unsigned(x) for x in types) \
            and _nonneg_literal(lo):
        hi = ir.Cond(ir.Binary(">", n, lhs.rhs, ir.BOOL), ir.Binary("-", n, lhs.rhs, t),
                     ir.Const("0", t), t)
        return ir.Binary("<", lhs.lhs, hi, c.type)
    return c


def _below_both(c: ir.Binary, v: ir.Var) -> ir.Binary:
    """`i < a && i < b` (`<=` on either side) as `i < (a < b ? a : b)` (with a + 1 for `<=`),
    when a and b have one type; else c itself."""
    if not (isinstance(c, ir.Binary) and c.op == "&&"):
        return c
    sides = []
    for x in (c.lhs, c.rhs):
        if not (isinstance(x, ir.Binary) and x.op in ("<", "<=") and
                isinstance(x.lhs, ir.Var) and x.lhs.uid == v.uid):
            return c
        b = x.rhs if x.op == "<" else ir.Binary("+", x.rhs, ir.Const("1", ir.INT), x.rhs.type)
        sides.append(b)
    a, b = sides
    if a.type != b.type:
        return c
    hi = ir.Cond(ir.Binary("<", a, b, ir.BOOL), a, b, a.type)
    return ir.Binary("<", c.lhs.lhs, hi, ir.BOOL)


def _bound_call(x: ir.Call) -> bool:
    """std::min / std::max of two values: a pure call a loop bound may make."""
    return not x.user and len(x.args) == 2 and ir.call_name(x.fn) in ("std::min", "std::max")


def canonical(s: ir.Loop, rv) -> "CanonLoop | None":
    """for (int i = lo; i < hi; i += c) with i, lo, hi unchanged by the body."""
    if len(s.init) != 1 or len(s.inc) != 1 or s.cond is None:
        return None
    d, inc, c = s.init[0], s.inc[0], s.cond
    if not isinstance(d, ir.Decl) or d.var.type.real or d.var.type.is_memory or \
            d.init is None:
        return None
    v = d.var
    if not (isinstance(inc, ir.Assign) and isinstance(inc.target, ir.Var) and
            inc.target.uid == v.uid and inc.op in ("+=", "-=") and
            step_of(inc.value) is not None):
        return None
    if not isinstance(c, ir.Binary):
        return None
    up = inc.op == "+="
    if up:
        c = _unrolled(_below_both(c, v), v, d.init)
    if not (isinstance(c.lhs, ir.Var) and c.lhs.uid == v.uid):
        return None
    if up and c.op not in ("<", "<="):
        return None
    if not up and c.op not in (">", ">="):
        return None
    hi = c.rhs
    if c.op == "<=":
        hi = ir.Binary("+", hi, ir.Const("1", ir.INT), hi.type)
    if c.op == ">":
        hi = ir.Binary("+", hi, ir.Const("1", ir.INT), hi.type)
    body_writes_vars = set()
    body_writes_mem = set()
    for st in ir.walk_stmts(s.body):
        if isinstance(st, ir.Assign):
            if isinstance(st.target, ir.Var):
                body_writes_vars.add(st.target.uid)
            else:
                r = rv.al.root_of(st.target)
                if r is not None:
                    body_writes_mem.add(r.uid)
                    body_writes_vars.add(r.uid)
        call = rv.user_call(st) if isinstance(st, (ir.Assign, ir.Decl, ir.ExprStmt)) \
            else None
        if call is not None:
            for i in call_writes(rv.module, call):
                r = rv.al.root_of(call.args[i])
                if r is not None:
                    body_writes_mem.add(r.uid)
                    body_writes_vars.add(r.uid)
    for e in (d.init, c.rhs):
        for x in ir.walk_expr(e):
            if isinstance(x, ir.Var) and x.uid in body_writes_vars:
                return None
            if isinstance(x, (ir.Index, ir.Unary)) and not isinstance(x, ir.Var):
                r = ir.root_var(x)
                if r is not None and rv.al.roots.get(r.uid, r).uid in body_writes_mem:
                    return None
            if isinstance(x, ir.Call) and not _bound_call(x):
                return None
    if v.uid in body_writes_vars:
        return None
    if ("var", v.uid) in rv.facts.address_taken:
        return None
    return CanonLoop(v, d.init, hi, up, step_of(inc.value))
