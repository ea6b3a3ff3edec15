"""Integer index arithmetic: which elements the iterations of a parallel loop touch.

An index such as `(b * Tn + s) * C3 + 2 * C + h * hs + i`, with `C3 = 3 * C` and
`hs = C / NH`, is read as a polynomial with integer coefficients over

- coordinates: counters of the loops the code runs in, each with its range (`lo <= v <=
  hi`, bounds that may mention outer counters) and step;
- atoms: integers the loop does not change (parameters, locals set before it), assumed
  non-negative -- the caller checks that at run time before it relies on an answer, see
  `Space.assumed` -- and divisors at least 1;
- quotients and remainders `x / d`, `x % d` of such polynomials.

Locals defined once from these (`int n = t + 1;`, row pointers `x = inp + n * C`) are
substituted. An integer computed from data (a value loaded from memory, `t < 0 ? 0 : t`,
`std::min(...)`) is a factor of its own whose range comes from its form: a comparison in a
`?:` bounds its branches, `x % d` with x >= 0 lies in [0, d - 1]; a plain load is unbounded.
A floating value makes the index unknown.

Questions, with the bounds of each coordinate (`upper`, `lower`):

- `nonneg(p)`: is p >= 0 for every value of the atoms? Every monomial has a non-negative
  coefficient, after using `d * (x / d) <= x` and that a loop which ran had a non-empty range.
- `meet_only_within(a, b, iters)`: can index a in one iteration equal index b in another one
  (iterations differing in a counter of `iters`)? Read as mixed-radix numbers: peel the
  digit of the largest stride off both sides (`a = sigma * ka + ra`); when every value the
  rests take lies within sigma - 1 of each other, equal indices have equal digits. Once each
  counter of `iters` is such a digit, equal indices mean equal iterations; if at some digit
  the rests' ranges do not overlap, the indices never meet.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .. import ir
from .bounds import Bounds, Coord, add, const, frozen, mul, thawed  # noqa: F401 - re-exported
from .conditions import Conditions

_MINMAX = ("std::min", "std::max", "min", "max")


def _union(a: list, b: list) -> list:
    """The polynomials of a, then those of b, each once, at most four."""
    out, seen = [], set()
    for p in (*a, *b):
        if frozen(p) not in seen:
            seen.add(frozen(p))
            out.append(p)
    return out[:4]


def key(v: ir.Var):
    """How the space names a variable: its uid, or its name for a generated one (uid 0)."""
    return v.uid if v.uid > 0 else ("g", v.name)


def _int_literal(c: ir.Const) -> "int | None":
    if c.type.real:
        return None
    m = re.fullmatch(r"(\d+)[uUlL]*", c.text)
    return int(m.group(1)) if m else None


@dataclass
class Space(Bounds, Conditions):
    """The integers of one loop body: its coordinates, the locals it defines once, and the
    variables it changes otherwise (unknown)."""
    coords: dict = field(default_factory=dict)        # key -> Coord
    defs: dict = field(default_factory=dict)          # key -> ir.Expr (int or pointer local)
    varying: set = field(default_factory=set)         # keys whose value is unknown here
    atoms: dict = field(default_factory=dict)         # key -> ir.Var, filled as met
    divisors: dict = field(default_factory=dict)      # key -> ir.Var: atoms used as divisors
    used: set = field(default_factory=set)            # atoms an answer given relied on
    opaque: dict = field(default_factory=dict)        # ("u", n) -> integer from data (ir.Expr)
    #: coordinates that hold one value of a loop's counter rather than count themselves (the
    #: index of a running max, engine/lastwrite.py): read only where that loop ran, so their
    #: range is not empty where an index reads them
    taken: set = field(default_factory=set)
    _busy: set = field(default_factory=set)
    #: key -> key: a counter read through a narrower coordinate of its own (a branch guarded
    #: by a comparison of the counter, see reverse/parallel.py)
    alias: dict = field(default_factory=dict)
    _trail: "set | None" = None                       # atoms the current question relies on
    #: invariant polynomials the answers given assume non-negative, checked at run time
    #: (Conditions.assuming), and those the current question assumes
    assumptions: list = field(default_factory=list)
    _pending: "list | None" = None
    _assume: bool = False

    def __post_init__(self):
        self._trail = self.used
        self._pending = self.assumptions

    # ------------------------------------------------------------------ reading IR
    def poly(self, e) -> "dict | None":
        """e as a polynomial, None when it is not one (a load, a floating value, ...)."""
        if isinstance(e, ir.Const):
            n = _int_literal(e)
            return None if n is None else const(n)
        if isinstance(e, ir.Var):
            return self._var(e)
        if isinstance(e, ir.Cast):
            if e.type.real or e.operand.type.real or e.type.is_pointer:
                return None
            return self.poly(e.operand)
        if isinstance(e, ir.Unary) and e.op in ("-", "+"):
            p = self.poly(e.operand)
            return None if p is None else (p if e.op == "+" else add({}, p, -1))
        if not isinstance(e, ir.Binary) or e.type.real:
            return self._unknown(e)
        if e.op == "-" and e.lhs.type.is_pointer and e.rhs.type.is_pointer:
            a, b = self.pointer(e.lhs), self.pointer(e.rhs)
            if a is None or b is None or a[0] != b[0]:
                return None
            return add(a[1], b[1], -1)
        a, b = self.poly(e.lhs), self.poly(e.rhs)
        if a is None or b is None:
            return None
        if e.op == "+":
            return add(a, b)
        if e.op == "-":
            return add(a, b, -1)
        if e.op == "*":
            return mul(a, b)
        if e.op in ("/", "%"):
            return self._divide(a, b, e.op)
        return None

    def _var(self, v: ir.Var) -> "dict | None":
        k = self.alias.get(key(v), key(v))
        if v.type.real or v.type.is_memory or k in self.varying:
            return None
        if k in self.coords:
            return {(("c", k),): 1}
        if k in self.defs:
            return self._through(k, self.poly)
        if v.uid == 0:
            return None                # a generated local the body does not define
        self.atoms[k] = v
        return {(("a", k),): 1}

    def _through(self, k, read):
        """read(the definition of local k), None for a definition that reaches itself."""
        if k in self._busy:
            return None
        self._busy.add(k)
        try:
            return read(self.defs[k])
        finally:
            self._busy.discard(k)

    def _unknown(self, e) -> "dict | None":
        """An integer computed from data, as a factor of its own (see the module docstring)."""
        if not isinstance(e, (ir.Cond, ir.Index, ir.Call)) or e.type.real or e.type.is_memory:
            return None
        if isinstance(e, ir.Call) and ir.call_name(e.fn) not in _MINMAX:
            return None
        f = next((f for f, x in self.opaque.items() if x == e), None)
        if f is None:
            f = ("u", len(self.opaque))
            self.opaque[f] = e
        return {(f,): 1}

    def _range(self, e) -> tuple:
        """(lower bounds, upper bounds) of an integer expression: two lists of polynomials,
        each of which holds (empty: that side unknown)."""
        if isinstance(e, ir.Var) and key(e) in self.defs:
            got = self._through(key(e), self._range)
            return got if got is not None else ([], [])
        if isinstance(e, ir.Cond):
            lt, ht = self._refined(e.then, e.cond, True)
            lo_, ho = self._refined(e.other, e.cond, False)
            return (self._pick(lt, lo_, False), self._pick(ht, ho, True))
        if isinstance(e, ir.Call) and len(e.args) == 2 and ir.call_name(e.fn) in _MINMAX:
            (la, ha), (lb, hb) = self._range(e.args[0]), self._range(e.args[1])
            if ir.call_name(e.fn) in ("std::min", "min"):
                return (self._pick(la, lb, False), _union(ha, hb))   # min <= either
            return (_union(la, lb), self._pick(ha, hb, True))
        if isinstance(e, (ir.Index, ir.Call)):
            return ([], [])
        p = self.poly(e)
        return ([], []) if p is None else ([p], [p])

    def _refined(self, e, cond, holds: bool) -> tuple:
        """The range of e where `cond` holds (or not): when cond compares e itself, the bound
        the comparison gives comes first, then e's own (`b * 64 + 64 < N ? b * 64 + 64 : N`:
        the first branch is at most N - 1 and at most b * 64 + 64, the second at most
        b * 64 + 64)."""
        lo, hi = self._range(e)
        if isinstance(e, ir.Const) or not (isinstance(cond, ir.Binary) and
                                           cond.op in ("<", "<=", ">", ">=")):
            return lo, hi
        op, other = cond.op, None
        if cond.lhs == e:
            other = cond.rhs
        elif cond.rhs == e:
            other, op = cond.lhs, {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[op]
        k = self.poly(other) if other is not None else None
        if k is None:
            return lo, hi
        if not holds:
            op = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}[op]
        if op in ("<", "<="):
            hi = _union([add(k, const(-1 if op == "<" else 0))], hi)
        else:
            lo = _union([add(k, const(1 if op == ">" else 0))], lo)
        return lo, hi

    def _pick(self, a: list, b: list, upper: bool) -> list:
        """Bounds of the larger (upper) or the smaller of two values bounded by a and b: for
        each pair of bounds, the one the engine can show is the larger (smaller)."""
        out = []
        for x in a:
            for y in b:
                if frozen(x) == frozen(y):
                    out.append(x)
                elif self.at_most(x, y):
                    out.append(y if upper else x)
                elif self.at_most(y, x):
                    out.append(x if upper else y)
        return _union(out, [])

    def _divide(self, x: dict, d: dict, op: str) -> "dict | None":
        if not d or any(f[0] != "a" for m in d for f in m):
            return None                # a divisor that changes inside the loop
        if list(d) == [()]:
            if d[()] <= 0:
                return None
            if list(x) in ([()], []):
                n = x.get((), 0)
                return const(n // d[()] if op == "/" else n % d[()]) if n >= 0 else None
        elif len(d) == 1 and list(d.values()) == [1] and len(next(iter(d))) == 1:
            uid = next(iter(d))[0][1]
            self.divisors[uid] = self.atoms[uid]
        else:
            return None
        return {(("q" if op == "/" else "r", frozen(x), frozen(d)),): 1}

    def pointer(self, e) -> "tuple | None":
        """(root name, offset polynomial) of a pointer expression."""
        if isinstance(e, ir.Var):
            k = key(e)
            if k in self.defs:
                return self._through(k, self.pointer)
            if k in self.varying:
                return None
            return (e.name, {})
        if isinstance(e, ir.Cast) and e.type.is_pointer:
            return self.pointer(e.operand)
        if isinstance(e, ir.Binary) and e.op in ("+", "-") and e.lhs.type.is_pointer:
            base, off = self.pointer(e.lhs), self.poly(e.rhs)
            if base is None or off is None:
                return None
            return (base[0], add(base[1], off, 1 if e.op == "+" else -1))
        if isinstance(e, ir.Unary) and e.op == "&" and isinstance(e.operand, ir.Index):
            base, off = self.pointer(e.operand.base), self.poly(e.operand.index)
            if base is None or off is None:
                return None
            return (base[0], add(base[1], off))
        return None

    def element(self, e) -> "tuple | None":
        """(root name, index polynomial) of a memory access `p[i]` or `*p`."""
        if isinstance(e, ir.Index):
            base, off = self.pointer(e.base), self.poly(e.index)
        elif isinstance(e, ir.Unary) and e.op == "*":
            base, off = self.pointer(e.operand), {}
        else:
            return None
        if base is None or off is None:
            return None
        return (base[0], add(base[1], off))

    def to_expr(self, p: dict) -> "ir.Expr":
        """An invariant polynomial as a C++ expression of type long."""
        L = ir.LONG
        terms = []
        for m, c in sorted(p.items(), key=repr):
            e = None
            for f in m:
                x = self._factor_expr(f)
                e = x if e is None else ir.Binary("*", e, x, L)
            k = ir.Const(str(abs(c)), L)
            if e is None:
                e = k
            elif abs(c) != 1:
                e = ir.Binary("*", k, e, L)
            terms.append((c < 0, e))
        if not terms:
            return ir.Const("0", L)
        terms.sort(key=lambda t: t[0])
        out = terms[0][1] if not terms[0][0] else ir.Unary("-", terms[0][1], L)
        for neg, e in terms[1:]:
            out = ir.Binary("-" if neg else "+", out, e, L)
        return out

    def _factor_expr(self, f) -> ir.Expr:
        if f[0] == "a":
            return ir.Cast(self.atoms[f[1]], ir.LONG, "c")
        op = "/" if f[0] == "q" else "%"
        return ir.Binary(op, self.to_expr(thawed(f[1])), self.to_expr(thawed(f[2])), ir.LONG)
