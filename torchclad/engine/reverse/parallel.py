"""When may the reverse of a `#pragma omp parallel for` loop run in parallel?

The forward pragma tells us the iterations' primal writes are independent. The reverse
sweep writes adjoints where the forward *read*, so two iterations may add into the same
adjoint element (every row reads the same weights). `reverse_clauses` inspects the
reverse body of one iteration and answers with the OpenMP clauses that make it race-free,
or None (run it serially):

- an adjoint element whose index is injective in the loop variable i is private to the
  iteration: `i`, or `i * E + j` with j from an inner loop `0 <= j < E` (E the same
  expression), also through a row pointer `x = base + i * E` (`x - base + j`);
- an adjoint only ever accumulated with `+=` and indexed by an inner loop variable alone
  (`_d_w[j]`, 0 <= j < H) becomes an array-section reduction `reduction(+: _d_w[:H])`;
- a scalar adjoint declared outside the loop and only accumulated becomes
  `reduction(+: _d_s)`;
- anything else (a tape pop, a callee's sweep, a write to an outer primal variable, an
  adjoint read that another iteration may write) keeps the loop serial.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import ir
from ..emit.cpp import spell


def _terms(e) -> list:
    """Additive terms of an index expression (a - b contributes -b as ('-', b))."""
    if isinstance(e, ir.Binary) and e.op == "+":
        return _terms(e.lhs) + _terms(e.rhs)
    if isinstance(e, ir.Binary) and e.op == "-":
        return _terms(e.lhs) + [("-", t) for t in _terms(e.rhs)]
    return [e]


@dataclass(frozen=True)
class Clauses:
    """The OpenMP reduction that makes a reverse loop race-free (empty: none needed)."""
    sections: tuple = ()     # (adjoint array name, extent): `reduction(+: name[:extent])`
    scalars: tuple = ()      # scalar adjoints: `reduction(+: name)`

    def pragma(self) -> str:
        items = [f"{name}[:{spell(n)}]" for name, n in self.sections] + list(self.scalars)
        return "omp parallel for" + (f" reduction(+: {', '.join(items)})" if items else "")


class ParallelCheck:
    def __init__(self, var: ir.Var, inner: dict, pointers: dict, varying: set):
        self.i = var
        self.inner = inner          # uid -> (lo, hi) of canonical loops inside the body
        self.pointers = pointers    # uid -> init (base + offset) of row pointers in the body
        self.varying = varying      # uids of primal variables that change inside the loop

    def _expand(self, terms) -> list:
        """Replace `q - base` (q a row pointer `base + off`) by the terms of off."""
        out = list(terms)
        changed = True
        while changed:
            changed = False
            for t in list(out):
                if isinstance(t, ir.Var) and t.uid in self.pointers:
                    init = self.pointers[t.uid]
                    neg = next((x for x in out if isinstance(x, tuple) and
                                isinstance(x[1], ir.Var) and
                                x[1].uid == ir.root_var(init).uid), None)
                    if neg is None or not isinstance(init, ir.Binary) or init.op != "+":
                        continue
                    out.remove(t)
                    out.remove(neg)
                    out.extend(_terms(init.rhs))
                    changed = True
        return out

    def _mentions(self, e, uids) -> bool:
        return bool(ir.vars_in(e) & uids)

    def classify(self, index) -> tuple:
        """('private',) | ('shared', H) | ('unsafe',)"""
        terms = self._expand(_terms(index))
        if any(isinstance(t, tuple) for t in terms):
            return ("unsafe",)
        inner = set(self.inner)
        i_terms = [t for t in terms if self._mentions(t, {self.i.uid})]
        j_terms = [t for t in terms if not self._mentions(t, {self.i.uid}) and
                   self._mentions(t, inner)]
        rest = [t for t in terms if t not in i_terms and t not in j_terms]
        if any(self._mentions(t, self.varying) for t in rest):
            return ("unsafe",)
        if len(i_terms) > 1:
            return ("unsafe",)
        if not i_terms:
            if len(j_terms) == 1 and not rest and isinstance(j_terms[0], ir.Var):
                lo, hi = self.inner[j_terms[0].uid]
                if isinstance(lo, ir.Const) and lo.text == "0":
                    return ("shared", hi)
            return ("unsafe",)
        t = i_terms[0]
        if isinstance(t, ir.Var):
            stride = None
        elif isinstance(t, ir.Binary) and t.op == "*":
            other = t.rhs if (isinstance(t.lhs, ir.Var) and t.lhs.uid == self.i.uid) else \
                t.lhs if (isinstance(t.rhs, ir.Var) and t.rhs.uid == self.i.uid) else None
            if other is None or self._mentions(other, self.varying | inner | {self.i.uid}):
                return ("unsafe",)
            stride = other
        else:
            return ("unsafe",)
        if stride is None:
            return ("private",) if not j_terms else ("unsafe",)
        if not j_terms:
            return ("private",)
        if len(j_terms) == 1 and isinstance(j_terms[0], ir.Var):
            lo, hi = self.inner[j_terms[0].uid]
            if isinstance(lo, ir.Const) and lo.text == "0" and spell(hi) == spell(stride):
                return ("private",)
        return ("unsafe",)


def reverse_clauses(check: ParallelCheck, body: list) -> "Clauses | None":
    declared = {x.var.name for s in body for x in ir.walk_stmts(s) if isinstance(x, ir.Decl)}
    arrays: dict = {}        # adjoint array name -> ("private" | ("shared", H) ...)
    array_reads: set = set()
    scalars_acc: set = set()
    scalars_other: set = set()

    def access(e, how: str):
        base = e.base
        if not (isinstance(base, ir.Var) and base.uid == 0 and
                base.name.startswith(("_d_", "_dl_"))):
            return                  # primal memory, or per-iteration slots (read-only here)
        kind = check.classify(e.index)
        prev = arrays.get(base.name)
        if kind[0] == "unsafe" or (prev is not None and prev[0] != kind[0]):
            arrays[base.name] = ("unsafe",)
            return
        arrays[base.name] = kind
        if how != "acc":
            array_reads.add(base.name)

    def visit_expr(e, how="read"):
        for x in ir.walk_expr(e):
            if isinstance(x, ir.TapePop):
                raise _Serial
            if isinstance(x, ir.Index):
                access(x, how if x is e else "read")
            if isinstance(x, ir.Var) and x.uid == 0 and x is not e and x.name not in declared \
                    and not x.type.is_pointer and x.name.startswith(("_d_", "_dl_")):
                scalars_other.add(x.name)

    try:
        for s in body:
            for x in ir.walk_stmts(s):
                if isinstance(x, (ir.TapePush, ir.TapeArray, ir.ExprStmt, ir.Return)):
                    raise _Serial
                if isinstance(x, ir.Assign):
                    t = x.target
                    acc = x.op in ("+=", "-=")
                    if isinstance(t, ir.Var):
                        if t.uid > 0 and t.uid in check.varying and t.name not in declared:
                            raise _Serial
                        if t.uid > 0 and t.name not in declared:
                            raise _Serial
                        if t.uid == 0 and t.name not in declared:
                            (scalars_acc if acc else scalars_other).add(t.name)
                    elif isinstance(t, ir.Index):
                        visit_expr(t.index)
                        access(t, "acc" if acc else "write")
                    else:
                        raise _Serial      # *_d_x: a parameter's scalar adjoint
                    visit_expr(x.value)
                else:
                    for e in ir.stmt_exprs(x):
                        visit_expr(e)
    except _Serial:
        return None
    if scalars_other & scalars_acc:
        return None
    sections = []
    for name in sorted(arrays):
        kind = arrays[name]
        if kind[0] == "unsafe":
            return None
        if kind[0] == "shared":
            if name in array_reads:
                return None
            sections.append((name, kind[1]))
    return Clauses(tuple(sections), tuple(sorted(scalars_acc)))


class _Serial(Exception):
    pass
