"""Element-sensitive memory: which elements an access touches, and whether a write can
overwrite an element a derivative read before it.

An access `p[e]` into memory root r has an offset from r's start: an affine form over the
counters of the canonical loops around it (`for (int i = lo; i < hi; i++)`), whose
coefficients are polynomials over symbols (integer parameters the function never assigns,
and integer locals assigned once from them). `probs_bt[i]` with
`probs_bt = probs + b*T*Vp + t*Vp` is `b*(T*Vp) + t*Vp + i`. Loop ranges bound the counters.

`Regions.conflict(use, write)` answers the to-be-recorded analysis' question "may the use
read, before the write runs, an element the write overwrites?" for two accesses of one
object: not when every way the use can run first (earlier in the same iteration of their
common loops, or in an earlier iteration of one of them) touches other elements. The
answer is True, False, or a set of facts `P >= 0` (polynomials over the symbols, which a
function can test on entry) under which it is False: softmax's rows of V elements laid out
with a stride of Vp are disjoint when `Vp - V >= 0`. Anything not affine is a conflict.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import ir

# A polynomial over symbols: {monomial (sorted tuple of symbol uids): integer coefficient}.
# An affine offset: {counter uid (or None for the part without counters): polynomial}.


def _padd(a: dict, b: dict, sign: int = 1) -> dict:
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, 0) + sign * c
        if out[m] == 0:
            del out[m]
    return out


def _pmul(a: dict, b: dict) -> dict:
    out: dict = {}
    for m1, c1 in a.items():
        for m2, c2 in b.items():
            m = tuple(sorted(m1 + m2))
            out[m] = out.get(m, 0) + c1 * c2
            if out[m] == 0:
                del out[m]
    return out


def _const(c: int) -> dict:
    return {(): c} if c else {}


def _aadd(a: dict, b: dict, sign: int = 1) -> dict:
    out = dict(a)
    for k, p in b.items():
        out[k] = _padd(out.get(k, {}), p, sign)
        if not out[k]:
            del out[k]
    return out


def _ascale(a: dict, p: dict) -> dict:
    out = {}
    for k, q in a.items():
        r = _pmul(q, p)
        if r:
            out[k] = r
    return out


@dataclass(frozen=True)
class Loop:
    counter: int          # uid
    lo: dict              # affine (outer counters, symbols)
    hi: dict              # exclusive
    path: tuple


class Regions:
    """Offsets of one function's memory accesses (see the module docstring)."""

    def __init__(self, fn: ir.Function, canon: dict, aliases):
        self.fn = fn
        self.al = aliases
        assigned = set()
        decls = {}
        for s in ir.walk_stmts(fn.body):
            if isinstance(s, ir.Assign) and isinstance(s.target, ir.Var):
                assigned.add(s.target.uid)
            if isinstance(s, ir.Decl):
                decls[s.var.uid] = s
        counters = {c.var.uid for c in canon.values()}
        self.counters = {c.var.uid for c in canon.values() if c.up}
        self.symbols: dict = {}          # uid -> the IR expression it stands for (a param: itself)
        for p in fn.params:
            if not p.type.is_memory and not p.type.real and p.uid not in assigned:
                self.symbols[p.uid] = p
        self.pointers: dict = {}         # pointer local uid -> its initializer
        self.defs: dict = {}             # int local uid -> its initializer (substituted)
        for uid, d in decls.items():
            if uid in assigned or uid in counters or d.init is None:
                continue
            t = d.var.type
            if t.ptr and not t.ref and not t.dims:
                self.pointers[uid] = d.init
            elif not t.is_memory and not t.real and not t.ref:
                self.defs[uid] = d.init
        self.loops: dict = {}            # counter uid -> Loop
        self.loop_of_path: dict = {}
        for path, c in canon.items():
            if not c.up:
                continue
            lo, hi = self.affine(c.lo), self.affine(c.hi)
            if lo is not None and hi is not None:
                self.loops[c.var.uid] = Loop(c.var.uid, lo, hi, path)
                self.loop_of_path[path] = c.var.uid

    # ------------------------------------------------------------------ offsets
    def symbolic(self, uid: int) -> bool:
        """Whether a local's value is a function of the symbols (evaluable on entry)."""
        return uid in self.symbols or (uid in self.defs and
                                       self.affine(self.defs[uid]) is not None and
                                       all(k is None for k in self.affine(self.defs[uid])))

    def affine(self, e, depth: int = 0) -> "dict | None":
        """e as an affine form over loop counters, or None."""
        if depth > 20:
            return None
        if isinstance(e, ir.Const):
            try:
                return {None: _const(int(e.text.rstrip("uUlL"), 0))}
            except ValueError:
                return None
        if isinstance(e, ir.Var):
            if e.uid in self.symbols:
                return {None: {(e.uid,): 1}}
            if e.uid in self.counters:
                return {e.uid: _const(1)}
            if e.uid in self.defs:
                inner = self.affine(self.defs[e.uid], depth + 1)
                if inner is not None and all(k is None for k in inner):
                    return inner                       # an int computed from the symbols
                if inner is None and self.evaluable(self.defs[e.uid]):
                    self.symbols[e.uid] = self.defs[e.uid]   # opaque, evaluable on entry
                    return {None: {(e.uid,): 1}}
            return None
        if isinstance(e, ir.Cast) and not e.type.real and not e.type.ptr:
            return self.affine(e.operand, depth + 1)
        if isinstance(e, ir.Unary) and e.op in ("-", "+"):
            a = self.affine(e.operand, depth + 1)
            return None if a is None else (_ascale(a, _const(-1)) if e.op == "-" else a)
        if isinstance(e, ir.Binary) and e.op in ("+", "-"):
            a, b = self.affine(e.lhs, depth + 1), self.affine(e.rhs, depth + 1)
            if a is None or b is None:
                return None
            return _aadd(a, b, 1 if e.op == "+" else -1)
        if isinstance(e, ir.Binary) and e.op == "*":
            a, b = self.affine(e.lhs, depth + 1), self.affine(e.rhs, depth + 1)
            if a is None or b is None:
                return None
            if set(a) <= {None}:
                return _ascale(b, a.get(None, {}))
            if set(b) <= {None}:
                return _ascale(a, b.get(None, {}))
        return None

    def evaluable(self, e) -> bool:
        """e reads only symbols (and constants): a function can compute it on entry."""
        for x in ir.walk_expr(e):
            if isinstance(x, ir.Var) and not self.symbolic(x.uid):
                return False
            if isinstance(x, (ir.Index, ir.Call, ir.TapePop, ir.Raw, ir.Member)):
                return False
        return True

    def pointer_offset(self, p, depth: int = 0) -> "tuple | None":
        """(root, offset) of a pointer expression into memory root."""
        if depth > 20:
            return None
        if isinstance(p, ir.Var):
            if p.type.is_memory and (p.uid not in self.pointers or p.type.dims):
                r = self.al.roots.get(p.uid, p)
                return (r, {}) if r.uid == p.uid else None
            if p.uid in self.pointers:
                return self.pointer_offset(self.pointers[p.uid], depth + 1)
            return None
        if isinstance(p, ir.Binary) and p.op in ("+", "-") and p.lhs.type.is_memory:
            base, off = self.pointer_offset(p.lhs, depth + 1) or (None, None)
            a = self.affine(p.rhs)
            if base is None or a is None:
                return None
            return base, _aadd(off, a, 1 if p.op == "+" else -1)
        if isinstance(p, ir.Cast) and p.type.ptr:
            return self.pointer_offset(p.operand, depth + 1)
        return None

    def access(self, e) -> "tuple | None":
        """(root uid, offset) of a memory read or write `p[i]` / `*p`; None if unknown."""
        if isinstance(e, ir.Index):
            base, idx = e.base, e.index
        elif isinstance(e, ir.Unary) and e.op == "*":
            base, idx = e.operand, ir.Const("0", ir.INT)
        else:
            return None
        got = self.pointer_offset(base)
        a = self.affine(idx)
        if got is None or a is None:
            return None
        return got[0].uid, _aadd(got[1], a)

    # ------------------------------------------------------------------ bounds
    def _bound(self, a: dict, want_max: bool, facts: set, renamed: frozenset,
               depth: int = 0) -> "dict | None":
        """A polynomial bounding affine a from above (want_max) or below over the ranges of
        its counters (innermost first); the signs it assumes of symbolic coefficients are
        added to facts. Counters in `renamed` are the use's own copies (same ranges)."""
        if depth > 40:
            return None
        counters = [k for k in a if k is not None]
        if not counters:
            return a.get(None, {})
        # the innermost: a counter whose loop is deepest
        key = max(counters, key=lambda k: len(self.loops[_base(k)].path))
        coef = a[key]
        loop = self.loops[_base(key)]
        if set(coef) == {()}:
            positive = coef[()] > 0
        elif all(c > 0 for c in coef.values()):
            facts.add(_freeze(coef))           # assume coef >= 0 (checked on entry)
            positive = True
        elif all(c < 0 for c in coef.values()):
            facts.add(_freeze(_pmul(coef, _const(-1))))      # assume coef <= 0
            positive = False
        else:
            return None
        hi1 = _aadd(loop.hi, {None: _const(-1)})
        end = (hi1 if positive == want_max else loop.lo)
        if isinstance(key, tuple):             # the use's copy: its bounds' counters too
            end = _rename(end, renamed)
        rest = {k: v for k, v in a.items() if k != key}
        return self._bound(_aadd(rest, _ascale(end, coef)), want_max, facts, renamed, depth + 1)

    # ------------------------------------------------------------------ the question
    def conflict(self, pu: tuple, au: "tuple | None", pw: tuple, aw: "tuple | None",
                 scope: tuple, loops: tuple, result: bool = False, exclusive: bool = False):
        """May the access au at pu (a derivative's read) touch, before the write aw at pw
        runs, an element the write overwrites, within one life of the object (scope)?
        True, False, or a frozenset of facts under which it may not. loops: the paths of
        every loop of the function. result: the use reads what this write wrote (then the
        same iteration is no conflict). exclusive: pu and pw are in the two branches of one
        `if` (every loop around both is around it: in one iteration of them, one runs)."""
        if au is None or aw is None or au[0] != aw[0]:
            return True
        for L in loops:        # a loop around both that we cannot count: repeats unknown
            if L[:len(scope)] == scope and pu[:len(L)] == L and pw[:len(L)] == L and \
                    L not in self.loop_of_path:
                return True
        common = [self.loop_of_path[L] for L in sorted(self.loop_of_path)
                  if L[:len(scope)] == scope and len(L) >= len(scope) and
                  pu[:len(L)] == L and pw[:len(L)] == L and len(pu) > len(L) and
                  pu[len(L)] == 1 and pw[len(L)] == 1]
        # other canonical loops around pu or pw that are not common, and non-canonical loops
        facts: set = set()
        cases = []
        if pu <= pw and not result and not exclusive:
            cases.append(len(common))          # the same iteration of every common loop
        cases.extend(range(len(common)))       # an earlier iteration of common loop k
        for k in cases:
            shared = frozenset(common[:k])
            mine = {c for c in aw[1] if c is not None} | {c for c in au[1] if c is not None}
            renamed = frozenset(c for c in mine if c not in shared)
            if any(c not in self.loops for c in mine):
                return True                    # a counter of a loop we cannot bound
            u = _rename(au[1], renamed)
            if k == len(common):
                d = _aadd(aw[1], u, -1)        # same iteration: the difference must not be 0
                f1, f2 = set(), set()
                lo = self._bound(d, False, f1, renamed)
                hi = self._bound(d, True, f2, renamed)
                ok = None
                if lo is not None:
                    ok = _facts(f1 | {_freeze(_padd(lo, _const(-1)))})
                if ok is None and hi is not None:
                    ok = _facts(f2 | {_freeze(_padd(_pmul(hi, _const(-1)), _const(-1)))})
                if ok is None:
                    return True
                facts |= ok
                continue
            c = common[k]
            s_w, s_u = aw[1].get(c, {}), au[1].get(c, {})
            if s_w != s_u or not s_w:
                return True
            rest_w = {x: v for x, v in aw[1].items() if x != c}
            rest_u = {x: v for x, v in u.items() if x != (c, "u")}
            f = set()
            lo = self._bound(_aadd(rest_w, rest_u, -1), False, f, renamed)
            if lo is None:
                return True
            # D = S * (c_w - c_u) + R, c_w - c_u >= 1, S >= 0: D >= S + min R >= 1
            f.add(_freeze(_padd(_padd(s_w, lo), _const(-1))))
            if set(s_w) != {()}:
                f.add(_freeze(s_w))
            elif s_w[()] < 0:
                return True
            ok = _facts(f)
            if ok is None:
                return True
            facts |= ok
        return frozenset(facts) if facts else False

    def condition(self, facts) -> ir.Expr:
        """The IR test of facts (each `P >= 0`), evaluable on entry to the function; a fact
        that another one implies (P - Q a constant >= 0 with Q >= 0 tested) is left out."""
        kept = []
        for f in sorted(facts, key=lambda f: sorted(f)):
            p = dict(f)
            if any(set(d := _padd(p, dict(g), -1)) <= {()} and d.get((), 0) >= 0 and g != f
                   for g in facts):
                continue
            kept.append(f)
        out = None
        for f in kept:
            e = self.poly_expr(dict(f))
            t = ir.Binary(">=", e, ir.Const("0", ir.LONG), ir.BOOL)
            out = t if out is None else ir.Binary("&&", out, t, ir.BOOL)
        return out if out is not None else ir.Const("true", ir.BOOL)

    def poly_expr(self, p: dict) -> ir.Expr:
        out = None
        for m, c in sorted(p.items()):
            term = ir.Const(str(abs(c)), ir.LONG)
            for uid in m:
                v = ir.Cast(self.symbols[uid], ir.LONG, "c")    # products in 64 bits
                term = v if (isinstance(term, ir.Const) and term.text == "1") else \
                    ir.Binary("*", term, v, ir.LONG)
            if out is None:
                out = term if c > 0 else ir.Unary("-", term, ir.LONG)
            else:
                out = ir.Binary("+" if c > 0 else "-", out, term, ir.LONG)
        return out if out is not None else ir.Const("0", ir.LONG)


def _base(k):
    return k[0] if isinstance(k, tuple) else k


def _rename(a: dict, renamed: frozenset) -> dict:
    return {((k, "u") if k in renamed else k): v for k, v in a.items()}


def _freeze(p: dict) -> frozenset:
    return frozenset(p.items())


def _facts(facts: set) -> "set | None":
    """facts without the ones that hold always (a constant >= 0); None if one never holds."""
    out = set()
    for f in facts:
        p = dict(f)
        if set(p) <= {()}:
            if p.get((), 0) < 0:
                return None
            continue
        out.add(f)
    return out
