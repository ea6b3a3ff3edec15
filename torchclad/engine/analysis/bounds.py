"""Bounds and proofs over the polynomials of analysis/affine.py.

`Bounds` is the half of `affine.Space` that answers questions (the other half reads IR into
polynomials): bounds of a polynomial over its coordinates' ranges, `nonneg`, `at_most`,
`meet_only_within` (see affine.py for what they mean), and the run-time assumptions the
answers relied on. It works on the Space's fields (coords, atoms, divisors, opaque, used) and
its `_range` of an integer computed from data.
"""
from __future__ import annotations

from dataclasses import dataclass


# A polynomial: {monomial: coefficient}; a monomial is a sorted tuple of factor keys (a key
# repeats for a power). Factor keys: ("a", uid) an atom, ("c", uid) a coordinate,
# ("q", x, d) the quotient x / d and ("r", x, d) the remainder x % d of two polynomials
# (frozen as sorted item tuples).


#: Most bounds `Bounds.bounds` keeps of one polynomial, and most substitution steps it takes.
_ALTERNATIVES = 4
_STEPS = 256


def const(n: int) -> dict:
    return {(): n} if n else {}


def _put(out: dict, m: tuple, c: int) -> None:
    """out[m] += c, dropping a monomial whose coefficient becomes 0."""
    v = out.get(m, 0) + c
    if v:
        out[m] = v
    else:
        out.pop(m, None)


def add(p: dict, q: dict, k: int = 1) -> dict:
    out = dict(p)
    for m, c in q.items():
        _put(out, m, k * c)
    return out


def mul(p: dict, q: dict) -> dict:
    out: dict = {}
    for m1, c1 in p.items():
        for m2, c2 in q.items():
            _put(out, tuple(sorted(m1 + m2, key=repr)), c1 * c2)
    return out


def frozen(p: dict) -> tuple:
    return tuple(sorted(p.items(), key=repr))


def thawed(t: tuple) -> dict:
    return dict(t)


@dataclass(frozen=True)
class Coord:
    """A loop counter: lo <= v <= hi (polynomials), moving by `step`; `depth` orders nesting."""
    lo: tuple
    hi: tuple
    step: int
    depth: int


class Bounds:
    """Questions about the polynomials of a Space (mixed into affine.Space)."""

    def _rely(self, p) -> None:
        """The question being answered relies on the atoms of p (a polynomial, monomial or
        factor) being non-negative (divisors positive)."""
        if isinstance(p, dict):
            for m in p:
                self._rely(m)
        elif isinstance(p, tuple) and p and isinstance(p[0], tuple):
            for f in p:
                self._rely(f)
        elif isinstance(p, tuple) and p and p[0] == "a":
            self._trail.add(p[1])
        elif isinstance(p, tuple) and p and p[0] in ("q", "r"):
            self._rely(thawed(p[1]))
            self._rely(thawed(p[2]))

    def _question(self, ask):
        """Run ask(); keep what it relied on only when it answers True."""
        saved, self._trail = self._trail, set()
        saved_p, self._pending = self._pending, []
        try:
            ok = ask()
        finally:
            trail, self._trail = self._trail, saved
            pending, self._pending = self._pending, saved_p
        if ok:
            self._trail |= trail
            self._pending.extend(q for q in pending if q not in self._pending)
        return ok

    # ------------------------------------------------------------------ factors
    def _depth(self, f) -> float:
        """Nesting depth of a factor that changes in the loop; -1 for invariant ones."""
        if f[0] == "c":
            return self.coords[f[1]].depth
        if f[0] == "u":
            return 1000
        if f[0] in ("q", "r"):
            inner = [self._depth(g) for m, _ in f[1] for g in m]
            return max(inner) + 0.5 if inner and max(inner) >= 0 else -1
        return -1

    def invariant(self, p: dict) -> bool:
        return all(self._depth(f) < 0 for m in p for f in m)

    def coords_in(self, p: dict) -> set:
        out = set()
        for m in p:
            for f in m:
                if f[0] == "c":
                    out.add(f[1])
                elif f[0] in ("q", "r"):
                    out |= self.coords_in(thawed(f[1]))
        return out

    def reaches(self, p: dict) -> set:
        """The coordinates p changes with: those in it, and those the ranges of those (and of
        the integers from data in it) mention, transitively."""
        todo, out = [p], set()
        while todo:
            q = todo.pop()
            for m in q:
                for f in m:
                    if f[0] == "c" and f[1] not in out:
                        out.add(f[1])
                        co = self.coords[f[1]]
                        todo += [thawed(co.lo), thawed(co.hi)]
                    elif f[0] in ("q", "r"):
                        todo += [thawed(f[1]), thawed(f[2])]
                    elif f[0] == "u" and f not in out:
                        out.add(f)
                        lo, hi = self._range(self.opaque[f])
                        todo += [*lo, *hi]
        return {u for u in out if not (isinstance(u, tuple) and u[:1] == ("u",))}

    # ------------------------------------------------------------------ bounds
    def bound(self, p: dict, upper: bool) -> "dict | None":
        """An upper (or lower) bound of p over every coordinate's range, free of coordinates;
        None when the engine cannot bound it. Of several bounds (`bounds`), one the engine can
        show to be the tightest, else the first."""
        got = self.bounds(p, upper)
        if not got:
            return None
        best = got[0]
        for q in got[1:]:
            if self.at_most(q, best) if upper else self.at_most(best, q):
                best = q
        return best

    def bounds(self, p: dict, upper: bool) -> list:
        """Upper (or lower) bounds of p over every coordinate's range, free of coordinates:
        every one holds. More than one when an integer computed from data is bounded in more
        than one way (`min(b * 64 + 64, N)` is at most either); at most _ALTERNATIVES."""
        todo, done, seen = [dict(p)], [], set()
        for _ in range(_STEPS):
            if not todo or len(done) >= _ALTERNATIVES:
                break
            q = todo.pop(0)
            live = [(self._depth(f), repr(f), f) for m in q for f in m if self._depth(f) >= 0]
            if not live:
                if frozen(q) not in seen:
                    seen.add(frozen(q))
                    done.append(q)
                continue
            f = max(live)[2]
            outs: "list | None" = [{}]
            for m, c in q.items():
                if f not in m:
                    outs = [add(o, {m: c}) for o in outs]
                    continue
                rest = list(m)
                rest.remove(f)
                if f in rest or any(self._depth(g) >= 0 for g in rest):
                    outs = None        # a product of two changing factors
                    break
                self._rely(tuple(rest))
                repl = self._factor_bounds(f, c, tuple(rest), upper == (c > 0))
                if not repl:
                    outs = None
                    break
                outs = [add(o, r) for o in outs for r in repl][:_ALTERNATIVES]
            if outs is not None:
                todo.extend(outs)
        return done

    def _factor_bounds(self, f, c: int, rest: tuple, up: bool) -> list:
        """The monomial c * f * rest (rest invariant, non-negative) with f replaced by its
        upper bound when `up`, by its lower bound otherwise (each bound the engine knows of
        an integer from data)."""
        unit = {rest: 1}
        if f[0] == "c":
            co = self.coords[f[1]]
            return [mul(unit, add({}, thawed(co.hi if up else co.lo), c))]
        if f[0] == "u":
            return [mul(unit, add({}, b, c)) for b in self._range(self.opaque[f])[1 if up else 0]]
        x, d = thawed(f[1]), thawed(f[2])
        lx = self.bound(x, False)
        if lx is None or not self.nonneg(lx):
            return []                  # x / d truncates towards zero: need x >= 0
        self._rely(d)
        if f[0] == "r":                # 0 <= x % d <= d - 1
            return [mul(unit, add({}, add(d, const(-1)), c)) if up else {}]
        dn = d.get(()) if list(d) == [()] else None
        if dn is not None and c % dn == 0:
            # d * (x / d) lies in [x - (d - 1), x], and in [0, x]: the larger lower bound
            if up or self.nonneg(add(lx, const(1 - dn))):
                return [mul(unit, add({}, x if up else add(x, const(1 - dn)), c // dn))]
            return [{}]
        return [mul(unit, add({}, x, c)) if up else {}]      # 0 <= x / d <= x

    # ------------------------------------------------------------------ proofs
    def nonneg(self, p: dict, facts: tuple = ()) -> bool:
        """p >= 0 for all non-negative atoms (p free of coordinates); `facts` are (atom
        factor, k) pairs known to hold as atom >= k where this is asked."""
        tries = [p, self._relate(p)]
        if facts:
            shifted = self._shift(p, facts)
            tries += [shifted, self._relate(shifted), self._shift(self._relate(p), facts)]
        for t in tries:
            if all(c >= 0 for c in t.values()):
                self._rely(t)
                if t is not tries[0]:
                    self._rely(p)      # the relations used hold for non-negative x, d >= 1
                return True
        return False

    def _relate(self, p: dict) -> dict:
        """Monomials with a negative coefficient bounded from below: -k * d * (x / d) >= -k * x,
        -k * (x % d) >= -k * (d - 1)."""
        for _ in range(8):
            out: dict = {}
            changed = False
            for m, c in p.items():
                repl = self._relate_one(m, c) if c < 0 else None
                if repl is None:
                    out = add(out, {m: c})
                else:
                    out = add(out, repl)
                    changed = True
            p = out
            if not changed:
                break
        return p

    def _relate_one(self, m: tuple, c: int) -> "dict | None":
        for f in m:
            if f[0] not in ("q", "r"):
                continue
            rest = list(m)
            rest.remove(f)
            x, d = thawed(f[1]), thawed(f[2])
            if f[0] == "r":
                return mul({tuple(rest): c}, add(d, const(-1)))
            if list(d) == [()]:
                if c % d[()] == 0:
                    return mul({tuple(rest): c // d[()]}, x)
                continue
            (dm,) = d
            if all(rest.count(g) >= dm.count(g) for g in dm):
                for g in dm:
                    rest.remove(g)
                return mul({tuple(rest): c}, x)
        return None

    def _shift(self, p: dict, facts: tuple) -> dict:
        for f, k in facts:
            out: dict = {}
            for m, c in p.items():
                term = {(): c}
                for g in m:
                    term = mul(term, {(g,): 1, (): k} if g == f else {(g,): 1})
                out = add(out, term)
            p = out
        return p

    def facts(self, coords) -> tuple:
        """Loops that ran have a non-empty range: (atom, k) with atom >= k for each
        coordinate whose range is `[lo, lo + atom + k - 1]`."""
        out = []
        for uid in sorted(coords):
            co = self.coords[uid]
            span = add(thawed(co.hi), thawed(co.lo), -1)       # >= 0
            k = -span.get((), 0)
            rest = {m: c for m, c in span.items() if m != ()}
            if len(rest) == 1 and list(rest.values()) == [1] and len(next(iter(rest))) == 1 \
                    and k > 0:
                out.append((next(iter(rest))[0], k))
        return tuple(sorted(set(out), key=repr))

    def at_most(self, p: dict, q: dict, facts: tuple = ()) -> bool:
        """p <= q for every value of the coordinates (bounding p above and q below)."""
        def ask():
            ups, los = self.bounds(p, True), self.bounds(q, False)
            return any(self.nonneg(add(lo, up, -1), facts) for up in ups for lo in los)
        return self._question(ask)

    def _digits(self, p: dict) -> dict:
        """coordinate uid -> (its stride polynomial, the step) for coordinates p is linear in
        with an invariant stride."""
        out: dict = {}
        bad = set()
        for m, c in p.items():
            cs = [f for f in m if f[0] == "c"]
            if len(cs) != 1 or any(self._depth(g) >= 0 for g in m if g != cs[0]):
                bad |= {f[1] for f in cs}
                continue
            rest = list(m)
            rest.remove(cs[0])
            out[cs[0][1]] = add(out.get(cs[0][1], {}), {tuple(rest): c})
        return {u: s for u, s in out.items() if u not in bad and s}

    def meet_only_within(self, a: dict, b: dict, iters: set, facts: tuple = ()) -> bool:
        """True when index a (in one iteration) equals index b (in another) only if the two
        iterations agree on every counter in `iters`."""
        return self._question(lambda: self._meet(a, b, iters, facts))

    def _meet(self, a: dict, b: dict, iters: set, facts: tuple) -> bool:
        """As read, else with the counters of blocks rebased (`_rebased`): a counter that
        starts at a changing value is better read as it is when its range already keeps the
        index within one digit (`for (s = t + 1; s < T; s++)` in a row of T)."""
        if self._digits_meet(a, b, iters, facts):
            return True
        ra, rb = self._rebased(a), self._rebased(b)
        if frozen(ra) == frozen(a) and frozen(rb) == frozen(b):
            return False
        return self._digits_meet(ra, rb, iters, facts)

    def _digits_meet(self, a: dict, b: dict, iters: set, facts: tuple) -> bool:
        need = set(iters)
        for _ in range(16):
            if self.at_most(a, add(b, const(-1)), facts) or \
                    self.at_most(b, add(a, const(-1)), facts):
                return True            # their ranges do not overlap
            if not need:
                return True
            da, db = self._digits(a), self._digits(b)
            pairs = [(u, w) for u in sorted(da, key=lambda u: (u not in need,
                                                               -self.coords[u].depth))
                     for w in sorted(db, key=lambda w: w != u)]
            got = next(((u, w, step) for u, w in pairs
                        for step in [self._peel(a, b, u, w, da[u], db[w], facts)]
                        if step is not None), None)
            if got is None and self._assume:
                got = self.assumed_peel(a, b, pairs, da, db, facts, iters)
            if got is None:
                return False
            u, w, (a, b) = got
            if u == w:
                need.discard(u)
        return False

    def _rebased(self, p: dict) -> dict:
        """p with each counter whose loop starts at a value that changes with an outer counter
        (`for (i = b * 64; i < e; i++)`) read as that start plus a counter of its own that
        starts at 0 and runs to hi - lo (`i = b * 64 + j`, `0 <= j <= e - 1 - b * 64`): then
        the blocks' counter is a digit of the index, the inner one the rest below it. Only
        where the counter appears outside quotients and remainders, to the first power."""
        for _ in range(8):
            plain = {f[1] for m in p for f in m if f[0] == "c" and m.count(f) == 1}
            inside = set()
            for m in p:
                for f in m:
                    if f[0] in ("q", "r"):
                        inside |= self.coords_in(thawed(f[1])) | self.coords_in(thawed(f[2]))
                    elif f[0] == "c" and m.count(f) > 1:
                        inside.add(f[1])
            todo = [u for u in plain - inside
                    if not isinstance(u, tuple) or u[:1] != ("rb",)
                    if not self.invariant(thawed(self.coords[u].lo))]
            if not todo:
                return p
            u = max(todo, key=lambda u: (self.coords[u].depth, repr(u)))
            co = self.coords[u]
            k = ("rb", u)
            if k not in self.coords:
                span = add(thawed(co.hi), thawed(co.lo), -1)
                self.coords[k] = Coord((), frozen(span), co.step, co.depth)
            start = add(thawed(co.lo), {(("c", k),): 1})
            out: dict = {}
            for m, c in p.items():
                if ("c", u) not in m:
                    out = add(out, {m: c})
                    continue
                rest = list(m)
                rest.remove(("c", u))
                out = add(out, mul({tuple(sorted(rest, key=repr)): c}, start))
            p = out
        return p

    def _peel(self, a, b, u, w, su, sw, facts, assume: "list | None" = None):
        """The rests of a and b without the digit of coordinate u (in a) and w (in b), if the
        two digits have one radix and the rests cannot tell them apart; else None. With
        `assume` (a list), a rest's fit in the radix that only the atoms' values could show is
        taken as a condition instead, appended to it (frozen polynomials >= 0)."""
        cu, cw = self.coords[u], self.coords[w]
        sigma = mul(su, const(cu.step))
        if frozen(sigma) != frozen(mul(sw, const(cw.step))):
            return None
        if u != w and (frozen(thawed(cu.lo)) != frozen(thawed(cw.lo)) or
                       not self.invariant(thawed(cu.lo))):
            return None
        if u == w and not self.invariant(thawed(cu.lo)):
            return None
        # a = su * u + rest = sigma * k + (rest + su * lo), k = (u - lo) / step >= 0
        ra = add(add(a, {m: c for m, c in mul(su, {(("c", u),): 1}).items()}, -1),
                 mul(su, thawed(cu.lo)))
        rb = add(add(b, {m: c for m, c in mul(sw, {(("c", w),): 1}).items()}, -1),
                 mul(sw, thawed(cw.lo)))
        gap = add(sigma, const(-1))
        if not self.invariant(sigma):
            return None

        def ask():
            for x, y in ((ra, rb), (rb, ra)):
                ups, los = self.bounds(x, True), self.bounds(y, False)
                fits = [add(gap, add(up, lo, -1), -1) for up in ups for lo in los]
                if any(self.nonneg(q, facts) for q in fits):
                    continue
                q = next((q for q in fits if self.checkable(q)), None) \
                    if assume is not None else None
                if q is None:
                    return False
                self._rely(q)
                assume.append(frozen(q))
            return True
        return (ra, rb) if self._question(ask) else None
