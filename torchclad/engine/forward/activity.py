"""Which objects carry a tangent in forward mode.

The same question as the reverse's activity analysis (analysis/activity.py), asked of more
kinds of code: besides a user's function, forward mode differentiates generated ones (the
pullback, split forward and sweep that a Hessian or a double backward differentiates again).
So the dependence edges here also model the tape (a pseudo-object `TAPE`: a push reads into
it, a pop reads from it) and calls of generated functions and custom pullbacks (they may
write every non-const floating pointer they are given). Objects are keyed as there:
('var', uid) for scalars and pointer variables, ('mem', uid) for memory.

active = varied (depends on a wrt input) ∩ useful (reaches an output or the result) ∩
floating; flow-insensitive. With the analyses off every floating object is active. In
generated code the tape is always active: every floating value recorded on it carries its
tangent, so the pushes and pops of functions differentiated separately stay in step.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from .. import ir, names
from ..analysis.activity import Aliases, find_aliases, reads_of, target_key

TAPE = ("tape",)


def _is_tape(e) -> bool:
    return isinstance(e, ir.Var) and "Tape" in e.type.base


def _has_pop(e) -> bool:
    return e is not None and any(isinstance(x, ir.TapePop) for x in ir.walk_expr(e))


def vector_of(e) -> "ir.Var | None":
    """v for `v.data()` of generated code (a partial-sum or per-iteration slot vector)."""
    if isinstance(e, ir.Raw) and e.text == names.VECTOR_DATA and e.reads:
        return e.reads[0]
    return None


def _pointer_init(s):
    """The value a statement gives a pointer variable (declaration or assignment), or None."""
    if isinstance(s, ir.Decl) and s.var.type.is_pointer:
        return s.init
    if isinstance(s, ir.Assign) and isinstance(s.target, ir.Var) and s.target.type.is_pointer:
        return s.value
    return None


def _last_choice(e):
    """The alias view of a pointer value in generated code: `v.data()` is v, and of
    `c ? p : q` only q (a parallel reverse chunk's adjoint is its partial sums p or, with one
    chunk, the adjoint q itself, which the same name points to outside the chunk loop);
    `GeneratedAliases` merges the arrays of p and q into one class."""
    v = vector_of(e)
    if v is not None:
        return v
    if isinstance(e, ir.Cond) and not ir.is_null(e.then) and not ir.is_null(e.other):
        return _last_choice(e.other)
    kids = ir.children(e)
    return ir.rebuild(e, tuple(_last_choice(k) for k in kids)) if kids else e


def _alias_view(fn: ir.Function, generated: bool, returns: Callable) -> ir.Function:
    """fn without the assignments of pointers read back from the tape (`p = pop`): they
    point where the pointer's other assignments do, which the alias analysis reads; in
    generated code, pointer values as `_last_choice` reads them; `p = f(a, ...)`, where f
    returns a pointer into its argument a (`returns`), as `p = a`."""

    def keep(s) -> bool:
        if isinstance(s, ir.Assign) and isinstance(s.target, ir.Var) and \
                s.target.type.is_pointer and _has_pop(s.value):
            return False
        return True

    def block(b: ir.Block) -> ir.Block:
        return ir.Block(tuple(stmt(s) for s in b.stmts if keep(s)), b.loc)

    def stmt(s):
        if isinstance(s, ir.Block):
            return block(s)
        if isinstance(s, ir.If):
            return replace(s, then=block(s.then), other=block(s.other))
        if isinstance(s, ir.Loop):
            return replace(s, body=block(s.body),
                           init=tuple(stmt(x) for x in s.init if keep(x)),
                           inc=tuple(stmt(x) for x in s.inc if keep(x)))
        if isinstance(s, ir.Decl) and s.var.type.is_pointer and _has_pop(s.init):
            return replace(s, init=None)
        init = _pointer_init(s)
        k = returns(init) if isinstance(init, ir.Call) else None
        if k is not None:
            init = init.args[k]
        elif not generated:
            return s
        if init is not None:
            init = _last_choice(init)
            return replace(s, init=init) if isinstance(s, ir.Decl) else replace(s, value=init)
        return s

    return replace(fn, body=block(fn.body))


@dataclass(frozen=True)
class GeneratedAliases(Aliases):
    """The aliases of generated code. `v.data()` points into vector v; a pointer given one of
    two arrays by a condition -- a parallel reverse chunk's adjoint, `T* _d_w = many ?
    _t4.data() + c * C : _t5`: the chunk's partial sums, or the adjoint itself when there is
    one chunk -- makes the two one class (`roots` maps the vector to the adjoint's root, a
    parameter), so they carry tangents together and the pointer's tangent is the same choice
    between their tangents. Forward mode needs no more: its tangents go where the values go."""

    def root_of(self, e) -> "ir.Var | None":
        return super().root_of(self._plain(e))

    def _plain(self, e):
        v = vector_of(e)
        if v is not None:
            return v
        if isinstance(e, ir.Cond) and e.type.is_memory:
            sides = [x for x in (e.then, e.other) if not ir.is_null(x)]
            roots = {getattr(self.root_of(x), "uid", None) for x in sides}
            return self._plain(sides[0]) if len(roots) == 1 and None not in roots else e
        kids = ir.children(e)
        return ir.rebuild(e, tuple(self._plain(k) for k in kids)) if kids else e


def _merge_choices(fn: ir.Function, al: Aliases) -> GeneratedAliases:
    """al with the arrays of every `p = c ? a : b` in one class (and p's own, when p is a
    parameter re-pointed in the chunk loop), represented by a parameter where one is."""
    base = GeneratedAliases(al.roots, al.vars)
    params = {p.uid for p in fn.params}
    rep: dict = {}                       # root uid -> a root of the same class (union-find)

    def find(r: ir.Var) -> ir.Var:
        while r.uid in rep:
            r = rep[r.uid]
        return r

    for s in ir.walk_stmts(fn.body):
        init = _pointer_init(s)
        if not isinstance(init, ir.Cond) or ir.is_null(init.then) or ir.is_null(init.other):
            continue
        target = s.var if isinstance(s, ir.Decl) else s.target
        members = [base.root_of(init.then), base.root_of(init.other)] + \
            ([target] if target.uid in params else [])
        if None in members:
            continue
        for m in members[1:]:
            a, b = find(members[0]), find(m)
            if a.uid == b.uid:
                continue
            if a.uid in params:
                a, b = b, a              # the parameter represents the class
            rep[a.uid] = b
    if not rep:
        return base
    roots = {uid: find(r) for uid, r in al.roots.items()}
    roots.update({uid: find(r) for uid, r in rep.items()})
    return GeneratedAliases(roots, al.vars)


@dataclass(frozen=True)
class Tangents:
    """The analysis' answer: which objects have a tangent."""
    active: frozenset
    aliases: Aliases

    def has(self, key) -> bool:
        return key in self.active

    def var(self, v: ir.Var) -> bool:
        """Whether variable v (a scalar, or the memory of an array/pointer root) has one."""
        return self.al_key(v) in self.active

    def al_key(self, v: ir.Var) -> tuple:
        if v.type.is_memory:
            r = self.aliases.roots.get(v.uid, v)
            return self.aliases.mem_key(r)
        return ("var", v.uid)

    def root(self, e) -> "ir.Var | None":
        return self.aliases.root_of(e)

    def memory(self, e) -> bool:
        """Whether the memory a pointer expression points into has a tangent."""
        r = self.aliases.root_of(e)
        return r is not None and self.aliases.mem_key(r) in self.active

    def reads(self, e) -> set:
        return reads(e, self.aliases)

    def expr(self, e) -> bool:
        """Whether a floating (non-pointer) expression has a non-zero tangent."""
        if not e.type.real or e.type.is_pointer:
            return False
        return bool(self.reads(e) & self.active)

    def arg(self, a) -> bool:
        """Whether a call argument carries a tangent: a floating value with one, or a pointer
        into memory with one."""
        if a.type.is_memory:
            return a.type.real and not ir.is_null(a) and self.memory(a)
        return self.expr(a)


def reads(e, al: Aliases) -> set:
    """Floating objects an expression reads through a differentiable path (the reverse's
    reads_of), the tape for a pop, and the arrays a call of a generated function is given."""
    out = reads_of(e, al)
    for x in ir.walk_expr(e):
        if isinstance(x, ir.TapePop):
            out.add(TAPE)
        elif isinstance(x, ir.Call) and not x.user:
            for a in x.args:
                if a.type.is_memory and a.type.real:
                    r = al.root_of(a)
                    if r is not None:
                        out.add(al.mem_key(r))
    return out


def _edges(fn: ir.Function, al: Aliases, writes: Callable, tape: bool) -> tuple:
    """(edges (target, sources), objects the result reads) of fn's dependence graph."""
    edges: list = []

    def add(target, sources):
        if target is not None:
            edges.append((target, frozenset(sources)))

    def call_edges(e):
        for x in ir.walk_expr(e):
            if not isinstance(x, ir.Call):
                continue
            written = writes(x)
            if written is None:
                continue
            src = set()
            for a in x.args:
                src |= reads(a, al)
                if a.type.is_memory and a.type.real:
                    r = al.root_of(a)
                    if r is not None:
                        src.add(al.mem_key(r))
            if tape and any(_is_tape(a) for a in x.args):
                src.add(TAPE)             # a generated callee records and reads back
                add(TAPE, src)
            for i in written:
                r = al.root_of(x.args[i])
                if r is not None:
                    add(al.mem_key(r), src)

    results: set = set()
    for s in ir.walk_stmts(fn.body):
        if isinstance(s, ir.Decl):
            if s.var.type.is_memory and s.init_list:
                add(("mem", s.var.uid), set().union(*[reads(e, al) for e in s.init_list]))
            elif s.init is not None and s.var.type.real and not s.var.type.is_pointer:
                add(("var", s.var.uid), reads(s.init, al))
            if s.init is not None:
                call_edges(s.init)
        elif isinstance(s, ir.Assign):
            tk = target_key(s.target, al)
            if s.target.type.real and not s.target.type.is_pointer and tk is not None:
                src = reads(s.value, al)
                if s.op != "=":
                    src |= {tk}
                add(tk, src)
            call_edges(s.value)
        elif isinstance(s, ir.ExprStmt):
            call_edges(s.expr)
        elif isinstance(s, ir.Return) and s.value is not None:
            results |= reads(s.value, al)
        elif isinstance(s, ir.TapePush):
            add(TAPE, reads(s.value, al))
        elif isinstance(s, ir.TapeArray):
            r = al.root_of(s.data)
            if r is not None and s.data.type.real:
                if s.pop:
                    add(al.mem_key(r), {TAPE})
                else:
                    add(TAPE, {al.mem_key(r)})
    return edges, results


def analyze(fn: ir.Function, globals_: dict, wrt: tuple, outputs: tuple,
            writes: Callable, enabled: bool = True, tape: bool = False,
            returns: Callable = lambda call: None) -> Tangents:
    """wrt / outputs: parameter Vars; writes(call) -> indices of the arguments whose memory a
    call writes, None for a call that is not differentiated (math); tape: fn is generated code
    whose tape carries tangents; returns(call) -> the index of the argument whose memory the
    pointer (or reference) a call returns points into, None for none."""
    al = find_aliases(_alias_view(fn, tape, returns), globals_)
    if tape:
        al = _merge_choices(fn, al)
    edges, results = _edges(fn, al, writes, tape)
    reals = {al.mem_key(v) for v in al.vars.values() if v.uid > 0 and v.type.real}
    reals |= {("mem", s.var.uid) for s in ir.walk_stmts(fn.body)
              if isinstance(s, ir.VectorDecl) and s.var.type.real}
    if tape:
        reals.add(TAPE)
    # a non-const floating global carries its tangent between functions (a global of the
    # generated code, like the reverse's global adjoint): always active
    shared = {al.mem_key(g) for g in tangent_globals(globals_)}
    reals |= shared
    if not enabled:
        params = {al.mem_key(p) for p in fn.params}
        keep = {al.mem_key(p) for p in wrt + outputs}
        # a scalar parameter the body assigns has a (local) tangent from then on
        keep |= {("var", s.target.uid) for s in ir.walk_stmts(fn.body)
                 if isinstance(s, ir.Assign) and isinstance(s.target, ir.Var)
                 and s.target in fn.params and s.target.type.real}
        return Tangents(frozenset((reals - params) | keep), al)
    varied = {al.mem_key(p) for p in wrt} | ({TAPE} if tape else set()) | shared
    useful = {al.mem_key(p) for p in outputs} | results | ({TAPE} if tape else set()) | shared
    for grow, forward in ((varied, True), (useful, False)):
        changed = True
        while changed:
            changed = False
            for t, src in edges:
                if forward and t not in grow and src & grow:
                    grow.add(t)
                    changed = True
                elif not forward and t in grow and not src <= grow:
                    grow |= src
                    changed = True
    return Tangents(frozenset(varied & useful & reals), al)


def tangent_globals(globals_: dict) -> list:
    """The globals that may carry a tangent: non-const, floating (in name order)."""
    return [g.var for _, g in sorted(globals_.items())
            if not g.var.type.const and g.var.type.real]
