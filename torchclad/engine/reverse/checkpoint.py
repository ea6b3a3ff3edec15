"""Checkpointed loops: `#pragma torchclad checkpoint [every(K)] [state(a[start:count], ...)]`.

A canonical loop `for (int i = lo; i < hi; i++) B` so marked does not record its iterations
on the tape. The forward sweep runs B as the primal does and, every K iterations (default
ceil(sqrt(n)) for n iterations), pushes a snapshot of the loop's state: the objects B both
writes and reads, declared outside it. The reverse sweep walks the segments backwards; for
each it pops the snapshot back into place, runs the segment's K iterations again with
recording (the ordinary forward sweep of B), and runs their reverse straight away. Tape
memory is n/K snapshots plus one segment's records instead of n iterations' records, and
the gradient is the same to the bit (the recomputation executes the same operations on the
same values).

What the state is made of:
- scalars declared outside B that B assigns and reads: pushed as values;
- local arrays B writes and reads: pushed whole (their size is in their type);
- memory behind pointers that B writes and reads: a section `p[start:count]`, named in the
  pragma's `state(...)` clause or inferred when every access in B is `p[j]` with `j` the
  counter of one inner loop `for (int j = a; j < b; j++)` (then the section is p[a:b-a]).

Objects B only reads are made available to the recomputation through the to-be-recorded
analysis: the loop counts as a use of each, so a later overwrite is recorded and undone
before the loop's reverse runs.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from .. import ir
from ..names import CHECKPOINT_END, CHECKPOINT_EVERY, CHECKPOINT_START, CHECKPOINT_TRIPS
from ..analysis.effects import call_writes
from ..emit.cpp import spell
from ..errors import DiffError

KEYWORD = "torchclad checkpoint"
SIZE_T = ir.Type("std::size_t")


@dataclass(frozen=True)
class Section:
    root: ir.Var          # pointer (parameter or local) whose memory is saved
    start: ir.Expr
    count: ir.Expr


@dataclass(frozen=True)
class Plan:
    every: "ir.Expr | None"
    scalars: tuple        # Vars: pushed by value
    arrays: tuple         # local array Vars: pushed whole
    sections: tuple       # Sections: pushed as runs
    uses: tuple           # keys the loop's reverse reads (for the to-be-recorded analysis)


def is_checkpoint(s) -> bool:
    return isinstance(s, ir.Loop) and s.pragma.startswith(KEYWORD)


# ---------------------------------------------------------------------- clause parsing
_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_]\w*)|(.))")


class _ExprParser:
    """Integer expressions in a pragma clause: names, integer literals, + - * / % ( )."""

    def __init__(self, text: str, names: dict, where):
        self.toks = [m.groups() for m in _TOKEN.finditer(text) if m.group(0).strip()]
        self.k = 0
        self.names = names
        self.where = where
        self.text = text

    def fail(self, why: str):
        raise DiffError(self.where, f"'#pragma torchclad checkpoint': cannot read "
                                    f"'{self.text}': {why}")

    def peek(self):
        return self.toks[self.k] if self.k < len(self.toks) else (None, None, None)

    def parse(self) -> ir.Expr:
        e = self.sum()
        if self.k != len(self.toks):
            self.fail("unexpected text after the expression")
        return e

    def sum(self):
        e = self.product()
        while self.peek()[2] in ("+", "-"):
            op = self.peek()[2]
            self.k += 1
            e = ir.Binary(op, e, self.product(), ir.LONG)
        return e

    def product(self):
        e = self.atom()
        while self.peek()[2] in ("*", "/", "%"):
            op = self.peek()[2]
            self.k += 1
            e = ir.Binary(op, e, self.atom(), ir.LONG)
        return e

    def atom(self):
        num, name, op = self.peek()
        self.k += 1
        if num is not None:
            return ir.Const(num, ir.LONG)
        if name is not None:
            v = self.names.get(name)
            if v is None or v.type.real or v.type.is_memory:
                self.fail(f"'{name}' is not an integer variable visible at the loop")
            return v
        if op == "(":
            e = self.sum()
            if self.peek()[2] != ")":
                self.fail("missing ')'")
            self.k += 1
            return e
        if op == "-":
            return ir.Unary("-", self.atom(), ir.LONG)
        self.fail("expected a name, a number or '('")


def _clauses(pragma: str) -> dict:
    out = {}
    for m in re.finditer(r"(every|state)\s*\(((?:[^()]|\([^()]*\))*)\)", pragma):
        out.setdefault(m.group(1), []).append(m.group(2).strip())
    return out


def _visible(fn: ir.Function, path: tuple) -> dict:
    """name -> Var for the parameters and the locals declared before `path` in the blocks
    that enclose it."""
    names = {p.name: p for p in fn.params}
    node = fn.body
    i = 0
    while i < len(path) and node is not None:
        k = path[i]
        if isinstance(node, ir.Block):
            for s in node.stmts[:k]:
                if isinstance(s, ir.Decl):
                    names[s.var.name] = s.var
            node, i = (node.stmts[k] if k < len(node.stmts) else None), i + 1
        elif isinstance(node, ir.If):
            node, i = (node.then if k == 0 else node.other), i + 1
        elif isinstance(node, ir.Loop):
            if k == 1:
                for s in node.init:
                    if isinstance(s, ir.Decl):
                        names[s.var.name] = s.var
                node, i = node.body, i + 1
            else:
                break
        else:
            break
    return names


# ---------------------------------------------------------------------- planning
def plan(rv, s: ir.Loop, p: tuple) -> Plan:
    """What to snapshot for the checkpointed loop `s` at path `p` (rv: the Reverse, after its
    collect walk went through the loop's body)."""
    canon = rv.canon.get(p)
    if canon is None or not canon.up or canon.step != 1:
        raise DiffError(s.loc, "'#pragma torchclad checkpoint' needs a counting loop "
                               "`for (int i = a; i < b; i++)` with i, a and b unchanged in the "
                               "body, and no break or return inside")
    al = rv.al
    inner = {canon.var.uid} | {x.var.uid for x in ir.walk_stmts(s.body)
                               if isinstance(x, ir.Decl)}
    reads, var_writes, mem_writes = _accesses(rv, s.body)
    reads = {k for k in reads if k[1] not in inner}
    every, given = _clauses_of(rv, s, p)
    scalars, arrays, sections = [], [], []
    for key in sorted(mem_writes & reads):
        root = al.vars.get(key[1])
        if key[0] == "var" or root is None:
            continue                  # a scalar written through a pointer: handled below
        if root.type.is_array:
            arrays.append(root)
        elif key in given:
            sections.append(given[key])
        else:
            sections.append(_infer(rv, s, p, key, root))
    for key in sorted(reads):
        if key[0] == "var" and (key[1] in var_writes or key in mem_writes) and \
                key[1] in al.vars:
            v = al.vars[key[1]]
            if v.type.is_array:
                continue
            scalars.append(v)
    _check_unchanged(s, sections, every,
                     var_writes | {k[1] for k in mem_writes if k[0] == "var"})
    saved_mem = {("mem", sec.root.uid) for sec in sections} | \
        {al.mem_key(al.roots.get(sec.root.uid, sec.root)) for sec in sections}
    uses = {k for k in reads if k not in saved_mem}
    for e in [every] + [x for sec in sections for x in (sec.start, sec.count)]:
        if e is not None:
            uses |= {k for k in rv.reads(e)}
    for sec in sections:
        uses.add(("var", sec.root.uid))
    return Plan(every, tuple(scalars), tuple(arrays), tuple(sections), tuple(sorted(uses)))


def _check_unchanged(s: ir.Loop, sections, every, changed: set) -> None:
    """The sections' bounds and every(...) must not depend on what the loop changes."""
    for sec in sections:
        for e in (sec.start, sec.count):
            for x in ir.walk_expr(e):
                if isinstance(x, ir.Var) and x.uid in changed:
                    raise DiffError(s.loc, f"'#pragma torchclad checkpoint': the section of "
                                           f"'{sec.root.name}' depends on '{x.name}', which "
                                           "the loop changes")
    if every is not None:
        for x in ir.walk_expr(every):
            if isinstance(x, ir.Var) and x.uid in changed:
                raise DiffError(s.loc, f"'#pragma torchclad checkpoint': every(...) depends "
                                       f"on '{x.name}', which the loop changes")


def _accesses(rv, body: ir.Block) -> tuple:
    """(reads, variables written, memory written) of a loop body, as object keys; a read of
    `&y` counts as a read of y."""
    al = rv.al
    reads, var_writes, mem_writes = set(), set(), set()
    for x in ir.walk_stmts(body):
        if isinstance(x, ir.Assign):
            t = x.target
            if isinstance(t, ir.Var):
                var_writes.add(t.uid)
                if x.op != "=":
                    reads.add(("var", t.uid))
            else:
                r = al.root_of(t)
                if r is not None:
                    mem_writes.add(al.mem_key(r))
                if x.op != "=":
                    reads |= rv.reads(t)
                else:
                    for part in ir.children(t):
                        reads |= rv.reads(part)
            reads |= rv.reads(x.value)
        else:
            for e in ir.stmt_exprs(x):
                reads |= rv.reads(e)
        call = rv.user_call(x) if isinstance(x, (ir.Decl, ir.Assign, ir.ExprStmt)) else None
        if call is not None:
            for i in call_writes(rv.module, call):
                r = al.root_of(call.args[i])
                if r is not None:
                    mem_writes.add(al.mem_key(r))
    reads = {k for k in reads if k[0] in ("var", "mem", "addr")}
    return {("var", k[1]) if k[0] == "addr" else k for k in reads}, var_writes, mem_writes


def _clauses_of(rv, s: ir.Loop, p: tuple) -> tuple:
    """every(...) as an expression (None: not given) and the state(...) sections, by the
    memory key of their root."""
    al = rv.al
    names = _visible(rv.fn, p)
    clauses = _clauses(s.pragma)
    every = None
    if "every" in clauses:
        if len(clauses["every"]) > 1:
            raise DiffError(s.loc, "'#pragma torchclad checkpoint': every(...) given twice")
        every = _ExprParser(clauses["every"][0], names, s.loc).parse()
    given = {}
    for text in clauses.get("state", []):
        for item in _split_items(text):
            m = re.fullmatch(r"([A-Za-z_]\w*)\s*\[(.*)\]", item.strip())
            if not m or ":" not in m.group(2):
                raise DiffError(s.loc, f"'#pragma torchclad checkpoint': state item '{item}' "
                                       "must be name[start:count]")
            v = names.get(m.group(1))
            if v is None or not v.type.is_pointer:
                raise DiffError(s.loc, f"'#pragma torchclad checkpoint': '{m.group(1)}' in "
                                       "state(...) is not a pointer visible at the loop")
            lo, n = m.group(2).split(":", 1)
            r = al.roots.get(v.uid, v)
            given[al.mem_key(r)] = Section(v, _ExprParser(lo, names, s.loc).parse(),
                                           _ExprParser(n, names, s.loc).parse())
    return every, given


def _split_items(text: str) -> list:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += ch in "[(" and 1 or (-1 if ch in "])" else 0)
        cur += ch
    if cur.strip():
        out.append(cur)
    return out


def _infer(rv, s, p, key, root) -> Section:
    """p[a:b-a] when every access to root in the body is root[j], j the counter of an inner
    counting loop over [a, b) (the same a and b for all)."""
    al = rv.al
    inner = {c.var.uid: c for q, c in rv.canon.items()
             if q[:len(p) + 1] == p + (1,) and c.up}
    bounds = set()
    ok = True
    for x in ir.walk_stmts(s.body):
        call = rv.user_call(x) if isinstance(x, (ir.Decl, ir.Assign, ir.ExprStmt)) else None
        if call is not None and any(a.type.is_memory and al.root_of(a) is not None and
                                    al.mem_key(al.root_of(a)) == key for a in call.args):
            ok = False
        for e in ir.stmt_exprs(x):
            for y in ir.walk_expr(e):
                if isinstance(y, ir.Index):
                    r = ir.root_var(y.base)
                    if r is None or al.mem_key(al.roots.get(r.uid, r)) != key:
                        continue
                    if not (isinstance(y.base, ir.Var) and y.base.uid == root.uid and
                            isinstance(y.index, ir.Var) and y.index.uid in inner):
                        ok = False
                        continue
                    c = inner[y.index.uid]
                    bounds.add((c.lo, c.hi))
                elif isinstance(y, ir.Unary) and y.op == "*":
                    r = ir.root_var(y.operand)
                    if r is not None and al.mem_key(al.roots.get(r.uid, r)) == key:
                        ok = False
    if not ok or len(bounds) != 1:
        raise DiffError(s.loc, f"'#pragma torchclad checkpoint': cannot tell which elements of "
                               f"'{root.name}' the loop changes; name them, e.g. "
                               f"'#pragma torchclad checkpoint state({root.name}[0:n])'")
    lo, hi = bounds.pop()
    count = hi if isinstance(lo, ir.Const) and lo.text == "0" else \
        ir.Binary("-", hi, lo, ir.LONG)
    return Section(root, lo, count)


def describe(pl: Plan, where: str) -> str:
    """One line for Engine.explain: the segment length and the snapshot."""
    every = spell(pl.every) if pl.every is not None else "ceil(sqrt(n))"
    state = [v.name for v in pl.scalars] + [f"{v.name}[]" for v in pl.arrays] + \
        [f"{sec.root.name}[{spell(sec.start)}:{spell(sec.count)}]" for sec in pl.sections]
    return f"checkpoint {where}: every {every}, snapshot [{', '.join(state) or '-'}]"


# ---------------------------------------------------------------------- code
def _snapshot(asm, pl: Plan, pop: bool) -> list:
    out = []
    for v in pl.scalars:
        out.append(ir.Assign("=", v, asm.popped_value(v)) if pop else asm.push_value(v))
    for v in pl.arrays:
        out.append(ir.TapeArray(v, ir.element_count(v.type), pop))
    for sec in pl.sections:
        base = ir.Binary("+", sec.root, sec.start, sec.root.type)
        out.append(ir.TapeArray(base, ir.Cast(sec.count, SIZE_T, "static"), pop))
    return list(reversed(out)) if pop else out


def _head(asm, canon, pl: Plan):
    """n, K and the declarations that compute them."""
    n = asm.names.fresh(CHECKPOINT_TRIPS, ir.LONG)
    k = asm.names.fresh(CHECKPOINT_EVERY, ir.LONG)
    args = (n,) if pl.every is None else (n, pl.every)
    return n, k, [ir.Decl(n, asm.trip_count(canon)),
                  ir.Decl(k, ir.Call("torchclad::checkpoint_every", args, ir.LONG, False))]


def _segment_loop(canon, start, end, body: list, reverse: bool) -> ir.Loop:
    v = canon.var
    t = v.type.value()
    zero = isinstance(canon.lo, ir.Const) and canon.lo.text == "0"
    lo = lambda off: ir.Cast(off if zero else ir.Binary("+", canon.lo, off, ir.LONG), t,
                             "static")
    if not reverse:
        return ir.Loop((ir.Decl(v, lo(start)),), ir.Binary("<", v, lo(end), ir.BOOL),
                       (ir.Assign("+=", v, ir.Const("1", ir.INT)),), ir.Block(tuple(body)))
    return ir.Loop((ir.Decl(v, lo(end)),), ir.reversed_cond(v, lo(start)),
                   (), ir.Block(tuple(body)))


def _plain(stmts) -> list:
    """The primal statements, with nested checkpoint pragmas (engine-only) removed."""
    out = []
    for s in stmts:
        if isinstance(s, ir.Loop):
            s = replace(s, body=replace(s.body, stmts=tuple(_plain(s.body.stmts))),
                        pragma="" if s.pragma.startswith(KEYWORD) else s.pragma)
        elif isinstance(s, ir.Block):
            s = replace(s, stmts=tuple(_plain(s.stmts)))
        elif isinstance(s, ir.If):
            s = replace(s, then=replace(s.then, stmts=tuple(_plain(s.then.stmts))),
                        other=replace(s.other, stmts=tuple(_plain(s.other.stmts))))
        out.append(s)
    return out


def _segment_end(seg, k, n, end) -> ir.Decl:
    """end = min(seg + K, n): one past the segment's last iteration (counted from lo)."""
    nxt = ir.Binary("+", seg, k, ir.LONG)
    return ir.Decl(end, ir.Cond(ir.Binary("<", nxt, n, ir.BOOL), nxt, n, ir.LONG))


def forward(asm, s: ir.Loop, p: tuple, pl: Plan) -> list:
    """The primal loop in segments of K iterations, a snapshot before each."""
    canon = asm.rv.canon[p]
    n, k, head = _head(asm, canon, pl)
    seg = asm.names.fresh(CHECKPOINT_START, ir.LONG)
    end = asm.names.fresh(CHECKPOINT_END, ir.LONG)
    inner = _segment_loop(canon, seg, end, _plain(s.body.stmts), False)
    body = _snapshot(asm, pl, False) + [
        _segment_end(seg, k, n, end),
        inner]
    outer = ir.Loop((ir.Decl(seg, ir.Const("0", ir.LONG)),), ir.Binary("<", seg, n, ir.BOOL),
                    (ir.Assign("+=", seg, k),), ir.Block(tuple(body)), s.loc)
    return [ir.Block(tuple(head + [outer] + asm.scope_saves(p)), s.loc)]


def reverse(asm, s: ir.Loop, p: tuple, pl: Plan) -> list:
    """Segments last to first: restore the snapshot, re-run the segment recording, reverse it."""
    canon = asm.rv.canon[p]
    n, k, head = _head(asm, canon, pl)
    seg = asm.names.fresh(CHECKPOINT_START, ir.LONG)
    end = asm.names.fresh(CHECKPOINT_END, ir.LONG)
    fwd = _segment_loop(canon, seg, end, asm.fwd_block(s.body, p + (1,)), False)
    rev = _segment_loop(canon, seg, end, asm.rev_block(s.body, p + (1,)), True)
    last = ir.Binary("*", ir.Binary("/", ir.Binary("+", n, ir.Binary("-", k, ir.Const(
        "1", ir.LONG), ir.LONG), ir.LONG), k, ir.LONG), k, ir.LONG)
    body = _snapshot(asm, pl, True) + [
        _segment_end(seg, k, n, end),
        fwd, rev]
    outer = ir.Loop((ir.Decl(seg, last),), ir.Raw("({0} -= {1}) >= 0", ir.BOOL, (seg, k), assigns=True), (),
                    ir.Block(tuple(body)), s.loc)
    others = [d for d in s.init if isinstance(d, ir.Decl) and d.var.uid != canon.var.uid]
    return [ir.Block(tuple(asm.scope_restores(p, others) + head + [outer]), s.loc)]
