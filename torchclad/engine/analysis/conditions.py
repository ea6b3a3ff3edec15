"""Run-time conditions of the integer proofs (mixed into affine.Space beside bounds.Bounds).

The proofs of bounds.py rest on the atoms they read being non-negative (divisors at least 1):
`require` and `assumed` turn that into C++ conditions tested before the loop. Where a digit
proof fails only because the part of an index below a digit may not fit in the digit's
stride -- rows of V elements Vp apart, disjoint when Vp - V >= 0, which nothing declares --
`assuming` lets it take that condition too (`assumed_peel`), for the caller to test at run
time beside the others.
"""
from __future__ import annotations

from .. import ir
from .bounds import thawed


class Conditions:
    """What the answers of a Space rely on, as run-time conditions."""

    def require(self, p: dict) -> None:
        """The caller relies on the atoms of p being non-negative (a size it allocates)."""
        self._rely(p)

    def assuming(self, ask):
        """ask(), with the digit proofs allowed to assume what they cannot show: that the
        part of an index below a digit fits in the digit's stride (a row of V elements taken
        from rows Vp apart: Vp - V >= 0), a condition of the atoms that assumed() then lists,
        to be tested at run time. For a question that failed without."""
        saved, self._assume = self._assume, True
        try:
            return self._question(ask)
        finally:
            self._assume = saved

    def assumed(self) -> list:
        """The conditions the answers given rest on, as C++ conditions: every atom they
        relied on >= 0 (>= 1 for a divisor), sorted by name, then the polynomials assumed
        non-negative (`assuming`)."""
        out = []
        for k, v in sorted(self.atoms.items(), key=lambda kv: kv[1].name):
            if k not in self.used:
                continue
            low = "1" if k in self.divisors else "0"
            out.append(ir.Binary(">=", v, ir.Const(low, ir.INT), ir.BOOL))
        for q in self.assumptions:
            out.append(ir.Binary(">=", self.to_expr(thawed(q)), ir.Const("0", ir.LONG),
                                 ir.BOOL))
        return out

    def assumed_peel(self, a, b, pairs, da, db, facts, iters):
        """(u, w, step) of the digit pair whose peel holds under the simplest condition of
        the atoms (fewest terms: the row of V in rows of Vp, Vp - V >= 0), that condition
        pending; or None. A condition must be linear and free of the parallel loops' bounds:
        one that holds only for few iterations (`N <= 1`) or for some remainders would hide,
        behind a test that fails, a loop that should be reported."""
        trips = set()
        for u in iters:
            if u in self.coords:
                for q in (thawed(self.coords[u].lo), thawed(self.coords[u].hi)):
                    trips |= {f for m in q for f in m}
        best = None
        for u, w in pairs:
            need: list = []
            step = self._peel(a, b, u, w, da[u], db[w], facts, need)
            if step is None or any(len(m) > 1 or (m and m[0][0] != "a") or set(m) & trips
                                   for q in need for m, _ in q):
                continue
            cost = sum(len(q) for q in need)
            if best is None or cost < best[0]:
                best = (cost, u, w, step, need)
        if best is None:
            return None
        self._pending.extend(q for q in best[4] if q not in self._pending)
        return best[1], best[2], best[3]

    def checkable(self, p: dict) -> bool:
        """p reads nothing but atoms (and their quotients), and some of them with a positive
        coefficient: a condition the code can test before the loop and that some sizes meet
        (a constant is not one: it failed already)."""
        if not any(c > 0 and m for m, c in p.items()):
            return False
        return self._reads_atoms(p)

    def _reads_atoms(self, p: dict) -> bool:
        for m in p:
            for f in m:
                if f[0] in ("q", "r"):
                    if not (self._reads_atoms(thawed(f[1])) and self._reads_atoms(thawed(f[2]))):
                        return False
                elif f[0] != "a":
                    return False
        return True

