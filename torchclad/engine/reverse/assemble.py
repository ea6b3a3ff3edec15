"""Assemble the forward sweep (primal + recording) and the reverse sweep of a function
from the per-statement adjoint code and the to-be-recorded analysis' answers.

    block:  fwd = fwd(s1) .. fwd(sn); push saved locals
            rev = pop saved locals; recompute locals; zero local adjoints; rev(sn) .. rev(s1)
    v = e:  fwd = [push v]; v = e         rev = adjoint swap; [v = pop]; backprop(e)
    if:     fwd = bool c = cond; if (c) .. else ..; push c      rev = if (pop) .. else ..
    loop:   canonical `for (int i = lo; i < hi; ++i)` runs backwards as `for (i = hi; i-- > lo;)`;
            any other loop counts its iterations and the reverse runs that many times.
"""
from __future__ import annotations

from dataclasses import replace

from .. import ir, names
from ..analysis.effects import call_writes
from ..analysis.tbr import Recording
from ..errors import DiffError
from . import checkpoint
from .adjoint import ZERO, Names
from .loops import is_signed, is_unsigned, is_zero_literal
from . import omp
from .transform import TAPE, ULONG, Reverse, inverse, template_args


class Assembler:
    def __init__(self, rv: Reverse, rec: Recording, split: bool, overlaps: list = (),
                 read_only: frozenset = frozenset(), owned_rows: bool = False):
        self.rv = rv
        self.rec = rec
        self.split = split
        self.overlaps = list(overlaps)  # sets of adjoint names whose memory may overlap
        # seeds whose resets are dead (analysis/outputs.py): the sweep only reads them
        self.read_only = read_only
        # the assigning sweep: zero the rows of input adjoints an iteration owns (rows.py);
        # rows: adjoint name -> rows.Row, as placed
        self.owned_rows = owned_rows
        self.rows: dict = {}
        self.names = Names({})
        self.rev_cache: dict = {}
        self.notes: list = []       # (loc, text): pragmas not kept, loops left serial

    # ------------------------------------------------------------------ helpers
    # A pointer into a local object holds an address in the forward's stack frame, which means
    # nothing to a split-mode sweep: it is stored as an offset from the start of that object
    # and rebuilt from the sweep's own copy of it.
    def _local_root(self, v) -> "ir.Var | None":
        if not v.type.is_pointer:
            return None
        r = self.rv.al.roots.get(v.uid, v)
        if r.uid == v.uid or r.uid in self.rv.facts.params or r.uid <= 0:
            return None
        return r

    @staticmethod
    def _start_of(r: ir.Var) -> ir.Expr:
        return r if r.type.is_array else ir.Unary("&", r, r.type.pointer_to())

    def push_value(self, v, loc=None):
        """Record the value of local v (a pointer into a local object as its offset)."""
        r = self._local_root(v)
        if r is None:
            return ir.TapePush(v, loc) if loc is not None else ir.TapePush(v)
        off = ir.Binary("-", v, self._start_of(r), ir.LONG)
        return ir.TapePush(off, loc) if loc is not None else ir.TapePush(off)

    def popped_value(self, v) -> ir.Expr:
        """The value of v that `push_value` recorded, taken off the tape."""
        r = self._local_root(v)
        if r is None:
            return ir.TapePop(v.type.value())
        return ir.Binary("+", self._start_of(r), ir.TapePop(ir.LONG), v.type)

    def _adjoint_decls(self, decls) -> list:
        out = []
        for d in decls:
            v = d.var
            if not v.type.real or v.type.is_pointer or not self.rv.act.var_active(v):
                continue
            t = ir.Type(v.type.base, 0, False, v.type.dims, True, record=v.type.record,
                        fields=v.type.fields)
            name = self.rv.adj_names[v.uid]
            if t.record:     # T _d_t{}; and every floating field zeroed (whatever T() does)
                a = ir.Var(name, t, 0)
                if not t.dims:
                    out += [ir.Decl(a), *ir.zeroed_fields(a, None)]
                    continue
                k = self.names.fresh(names.RESET_INDEX, ir.LONG)
                out += [ir.Decl(a, None, (ir.Const("{}", t),)), *ir.zeroed_fields(a, k)]
            elif v.type.dims:
                out.append(ir.Decl(ir.Var(name, t, 0), None, (ir.Const("{}", t),)))
            else:
                out.append(ir.Decl(ir.Var(name, t, 0), ir.Cast(ZERO, t.value(), "fn")))
        return out

    def _call_saves(self, s, p) -> list:
        """Local arrays (and scalars) a call overwrites while their old values are still
        needed: saved whole before the call, restored after the callee's reverse sweep."""
        if not self.rec.must_record(p):
            return []
        keys = self.rec.recorded_at(p)
        call = self.rv.calls[p][0] if p in self.rv.calls else None
        name = ir.call_name(call.fn) if call is not None else "a call"
        out = []
        for i in sorted(call_writes(self.rv.module, call)) if call is not None else ():
            r = self.rv.al.root_of(call.args[i])
            if r is None or (keys and self.rv.al.mem_key(r) not in keys):
                continue
            if not r.type.is_memory or r.type.is_object:   # a scalar or a struct object
                out.append(r)
                continue
            if not r.type.is_array:
                raise DiffError(getattr(s, "loc", None),
                                f"'{name}' overwrites array '{r.name}' whose old values the "
                                "derivative still needs, and its size is unknown here; pass "
                                "the call a copy (a separate buffer)")
            out.append(r)
        return out

    def _restore_call(self, s, p) -> list:
        """The restores of what a call wrote through its arguments (after its sweep)."""
        return [ir.TapeArray(r, ir.element_count(r.type), True) if r.type.is_array
                else ir.Assign("=", r, self.popped_value(r), s.loc)
                for r in self._call_saves(s, p)]

    def _target_recorded(self, s, p) -> bool:
        keys = self.rec.recorded_at(p)
        if not keys or not isinstance(s, ir.Assign):
            return True
        t = s.target
        return (("var", t.uid) if isinstance(t, ir.Var) else
                self.rv.al.mem_key(self.rv.al.root_of(t))) in keys

    def _when_needed(self, p, stmts: list) -> list:
        """stmts, run only when the entry test of a conditional record failed (tbr)."""
        k = self.rec.condition_index(p)
        if k is None or not stmts:
            return stmts
        flag = ir.Var(names.numbered(names.DISJOINT_FLAG, k), ir.BOOL, 0)
        return [ir.If(ir.Unary("!", flag, ir.BOOL), ir.Block(tuple(stmts)))]

    def _restore(self, s, p) -> list:
        return self._when_needed(p, self._restore_all(s, p))

    def _restore_all(self, s, p) -> list:
        if not self.rec.must_record(p):
            return []
        if not isinstance(s, ir.Assign):
            return self._restore_call(s, p)
        if not self._target_recorded(s, p):
            return []
        inv = inverse(s)
        if inv is not None:
            return [inv]
        if isinstance(s.target, ir.Var):
            return [ir.Assign("=", s.target, self.popped_value(s.target), s.loc)]
        return [ir.Assign("=", s.target, ir.TapePop(s.target.type.value()), s.loc)]

    def _record(self, s, p) -> list:
        return self._when_needed(p, self._record_all(s, p))

    def _record_all(self, s, p) -> list:
        if not self.rec.must_record(p):
            return []
        saves = [ir.TapeArray(r, ir.element_count(r.type), False) if r.type.is_array
                 else self.push_value(r, s.loc) for r in reversed(self._call_saves(s, p))]
        if not isinstance(s, ir.Assign):
            return saves
        if not self._target_recorded(s, p):
            return saves
        if inverse(s) is not None:
            return saves
        if isinstance(s.target, ir.Var):
            return saves + [self.push_value(s.target, s.loc)]
        return saves + [ir.TapePush(s.target, s.loc)]

    def _forward_call(self, e, p):
        info = self.rv.calls.get(p)
        if info is None or info[1] is None or info[1].custom:
            return e
        call, callee, _ = info
        return ir.Call(callee.forw + template_args(call.fn), call.args + (TAPE,), call.type,
                       False)

    # ------------------------------------------------------------------ forward
    def fwd_block(self, b: ir.Block, path: tuple, top=False) -> list:
        out = []
        ret = None
        for i, s in enumerate(b.stmts):
            if top and isinstance(s, ir.Return):
                ret = s
                continue
            out.extend(self.fwd_stmt(s, path + (i,)))
        out += self.scope_saves(path)
        if ret is not None and self.split:
            out.append(ir.Return(self._fwd_expr(ret.value, path + (len(b.stmts) - 1,))
                                 if ret.value is not None else None, ret.loc))
        return out

    def _fwd_expr(self, e, p):
        if isinstance(e, ir.Call):
            return self._forward_call(e, p)
        return e

    def fwd_stmt(self, s, p) -> list:
        if isinstance(s, ir.Decl):
            init = self._fwd_expr(s.init, p) if s.init is not None else None
            if init is None and not s.var.type.dims and not s.static and \
                    not s.var.type.is_object:
                # `double a;` assigned later: the tape may record its old value, which must
                # not be an indeterminate one
                init = ir.Cast(ir.Const("0", ir.INT), s.var.type.value(), "fn") \
                    if not s.var.type.ptr else ir.Const("nullptr", s.var.type)
            return self._record(s, p) + [replace(s, init=init)]
        if isinstance(s, ir.Assign):
            return self._record(s, p) + [replace(s, value=self._fwd_expr(s.value, p))]
        if isinstance(s, ir.ExprStmt):
            return self._record(s, p) + [replace(s, expr=self._fwd_expr(s.expr, p))]
        if isinstance(s, ir.Return):
            return []
        if isinstance(s, ir.Block):
            return [ir.Block(tuple(self.fwd_block(s, p)), s.loc)]
        if isinstance(s, ir.If):
            then = ir.Block(tuple(self.fwd_block(s.then, p + (0,))))
            other = ir.Block(tuple(self.fwd_block(s.other, p + (1,))))
            if not self._has_reverse(s, p) or self._invariant(s.cond):
                return [ir.If(s.cond, then, other, s.loc)]
            c = self.names.fresh(names.SAVED_PREFIX, ir.BOOL)
            return [ir.Decl(c, s.cond, (), s.loc), ir.If(c, then, other, s.loc), ir.TapePush(c)]
        if isinstance(s, ir.Loop):
            return self.fwd_loop(s, p)
        if isinstance(s, ir.Comment):
            return [s]
        raise DiffError(getattr(s, "loc", None), f"internal: forward of {type(s).__name__}")

    # ------------------------------------------------------------------ parallel loops
    def note(self, loc, text: str):
        """A warning for the driver to raise (a pragma the engine does not keep)."""
        self.notes.append((loc, text))

    def trip_count(self, canon) -> ir.Expr:
        """The number of iterations of a canonical loop (0 when it does not run)."""
        return canon.trips()

    def _omp(self, s: ir.Loop, p) -> "omp.Nest | None":
        """The parallel nest of a pragma'd loop, or None (noting why the pragma goes)."""
        nt = omp.nest(self, s, p)
        if isinstance(nt, str):
            self.note(s.loc, f"'#pragma {s.pragma}' is not kept; the loop runs serially in "
                             f"both sweeps: {nt}")
            return None
        return nt

    def fwd_loop(self, s: ir.Loop, p) -> list:
        if p in self.rv.checkpoints:
            if self._loop_has_reverse(s, p):
                return checkpoint.forward(self, s, p, self.rv.checkpoints[p])
            s = replace(s, pragma="")
        if s.pragma:
            nt = self._omp(s, p)
            if nt is not None:
                return omp.forward(self, nt)
            s = replace(s, pragma="")
        body = self.fwd_block(s.body, p + (1,))
        init = [x for k, st in enumerate(s.init) for x in self.fwd_stmt(st, p + (0, k))]
        inc = [x for k, st in enumerate(s.inc) for x in self.fwd_stmt(st, p + (2, k))]
        saves = self.scope_saves(p)
        needs_rev = self._loop_has_reverse(s, p)
        simple_inc = all(isinstance(x, ir.Assign) for x in inc)
        canon = self.rv.canon.get(p)
        if canon is not None or not needs_rev:
            if simple_inc and not saves:
                return [ir.Loop(tuple(init), s.cond, tuple(inc), ir.Block(tuple(body)), s.loc)]
            loop = ir.Loop((), s.cond, () if not simple_inc else tuple(inc),
                           ir.Block(tuple(body + ([] if simple_inc else inc))), s.loc)
            return [ir.Block(tuple(init + [loop] + saves))]
        cnt = self.names.fresh(names.SAVED_PREFIX, ULONG)
        bump = ir.Assign("+=", cnt, ir.Const("1", ir.INT))
        if simple_inc:
            loop = ir.Loop((), s.cond, tuple(inc), ir.Block(tuple([bump] + body)), s.loc)
        else:
            loop = ir.Loop((), s.cond, (), ir.Block(tuple([bump] + body + inc)), s.loc)
        out = init + [ir.Decl(cnt, ir.Const("0", ULONG)), loop, ir.TapePush(cnt)] + saves
        return [ir.Block(tuple(out), s.loc)]

    def scope_saves(self, path) -> list:
        """The forward's recording of the locals the scope at `path` saves, at its end."""
        out = []
        for d in self.rec.plan(path).saved:
            if d.var.type.is_array:
                out.append(ir.TapeArray(d.var, ir.element_count(d.var.type), False))
            else:
                out.append(self.push_value(d.var))
        return out

    # ------------------------------------------------------------------ reverse
    def scope_restores(self, path, decls) -> list:
        """The reverse's restores of those locals, their recomputations, and the zeroed
        adjoints of `decls`, at the start of the scope's reverse."""
        plan = self.rec.plan(path)
        out, rebuilt = [], []
        for d in reversed(plan.saved):
            v = d.var
            if v.uid in self.rv.facts.globals and v.type.is_array:
                out.append(ir.TapeArray(v, ir.element_count(v.type), True))
            elif v.uid in self.rv.facts.params or v.uid in self.rv.facts.globals:
                out.append(ir.Assign("=", v, ir.TapePop(v.type.value())))
            elif v.type.is_array:
                out.append(ir.Decl(replace(v, type=replace(v.type, const=False))))
                out.append(ir.TapeArray(v, ir.element_count(v.type), True))
            elif self._local_root(v) is not None:
                # the offset now, the pointer once every saved local (its object too) exists
                off = self.names.fresh(names.OFFSET_PREFIX, ir.LONG)
                out.append(ir.Decl(off, ir.TapePop(ir.LONG)))
                rebuilt.append(ir.Decl(v, ir.Binary("+", self._start_of(self._local_root(v)),
                                                    off, v.type)))
            else:
                out.append(ir.Decl(v, ir.TapePop(v.type.value())))
        out += rebuilt
        for d in plan.recomputed:
            out.append(replace(d, loc=d.loc))
        out.extend(self._adjoint_decls(decls))
        return out

    def rev_block(self, b: ir.Block, path: tuple, top=False) -> list:
        key = (path, top)
        if key in self.rev_cache:
            return self.rev_cache[key]
        body = []
        for i in reversed(range(len(b.stmts))):
            body.extend(self.rev_stmt(b.stmts[i], path + (i,)))
        decls = [s for s in b.stmts if isinstance(s, ir.Decl)]
        # pops must match the forward's pushes even when nothing else happens here
        if body or top or self.rec.plan(path).saved:
            out = self.scope_restores(path, decls) + body
        else:
            out = []
        if top:
            locals_ = sorted(self.rv.local_param_adj.values(), key=lambda lp: lp[1].uid)
            out = [ir.Decl(l, ir.Cast(ZERO, l.type, "fn")) for l, _ in locals_] + out + \
                [ir.Assign("+=", ir.Unary("*", ir.Var(self.rv.adj_names[p.uid],
                                                      l.type.pointer_to(), 0), l.type), l)
                 for l, p in locals_ if p.uid in self.rv.adjoint_params]
        self.rev_cache[key] = out
        return out

    def _has_reverse(self, s, p) -> bool:
        if isinstance(s, ir.If):
            return bool(self.rev_block(s.then, p + (0,)) or self.rev_block(s.other, p + (1,)))
        return bool(self.rev_stmt(s, p))

    def _invariant(self, cond) -> bool:
        """cond reads no memory and only parameters the function never assigns (e.g.
        `weight != nullptr`): it has one value throughout, so the reverse evaluates it again
        instead of taping a flag per execution (a tape record per iteration of a loop)."""
        for x in ir.walk_expr(cond):
            if isinstance(x, ir.Var):
                if not self.rv.facts.fixed_param(x.uid):
                    return False
            elif not (isinstance(x, (ir.Const, ir.Binary, ir.Cast, ir.Cond))
                      or (isinstance(x, ir.Unary) and x.op not in ("*", "&"))):
                return False
        return True

    def _loop_has_reverse(self, s: ir.Loop, p) -> bool:
        if self.rev_block(s.body, p + (1,)):
            return True
        return any(self._restore(st, p + (2, k)) or not self.rv.parts[p + (2, k)].empty
                   for k, st in enumerate(s.inc))

    def rev_stmt(self, s, p) -> list:
        if isinstance(s, (ir.Decl, ir.Assign, ir.ExprStmt, ir.Return)):
            parts = self.rv.parts[p]
            if not isinstance(s, ir.Assign):      # a call: its sweep sees the post-call state
                return list(parts.pre) + list(parts.post) + self._restore(s, p)
            after = self._restore_call(s, p) if p in self.rv.calls else []
            pre = [x for x in parts.pre if not self._seed_reset(x)]
            return pre + self._restore(s, p) + list(parts.post) + after
        if isinstance(s, ir.Block):
            inner = self.rev_block(s, p)
            return [ir.Block(tuple(inner))] if inner else []
        if isinstance(s, ir.If):
            then = self.rev_block(s.then, p + (0,))
            other = self.rev_block(s.other, p + (1,))
            if not then and not other:
                return []
            cond = s.cond if self._invariant(s.cond) else ir.TapePop(ir.BOOL)
            return [ir.If(cond, ir.Block(tuple(then)), ir.Block(tuple(other)))]
        if isinstance(s, ir.Loop):
            return self.rev_loop(s, p)
        return []

    def _seed_reset(self, x) -> bool:
        """x zeroes an element of a read-only seed (`_d_out[e] = 0`)."""
        if not self.read_only or not (isinstance(x, ir.Assign) and x.op == "=" and
                                      isinstance(x.value, ir.Const) and x.value.text == "0"):
            return False
        r = ir.root_var(x.target)
        return r is not None and not isinstance(x.target, ir.Var) and r.name in self.read_only

    def rev_loop(self, s: ir.Loop, p) -> list:
        if not self._loop_has_reverse(s, p):
            return []
        if p in self.rv.checkpoints:
            return checkpoint.reverse(self, s, p, self.rv.checkpoints[p])
        if s.pragma:
            nt = self._omp(s, p)
            if nt is not None:
                return omp.reverse(self, nt)
        body = self.rev_block(s.body, p + (1,))
        canon = self.rv.canon.get(p)
        init_decls = [st for st in s.init if isinstance(st, ir.Decl)]
        init_rev = [x for k in reversed(range(len(s.init)))
                    for x in self.rev_stmt(s.init[k], p + (0, k))]
        if canon is not None and canon.step != 1:
            return self._rev_stepped(s, p, canon, body, init_decls, init_rev)
        if canon is not None:
            v = canon.var
            if canon.up:
                head = ir.Decl(v, canon.hi)
                cond = ir.reversed_cond(v, canon.lo)
                inc = ()
            else:
                head = ir.Decl(v, canon.hi)
                cond = ir.Binary("<=", v, canon.lo, ir.BOOL)
                inc = (ir.Assign("+=", v, ir.Const("1", ir.INT)),)
            others = [d for d in init_decls if d.var.uid != v.uid]
            pre = self.scope_restores(p, others)
            loop = ir.Loop((head,), cond, inc, ir.Block(tuple(body)), s.loc,
                           "")
            return pre + [loop] + init_rev if pre or init_rev else [loop]
        pre = self.scope_restores(p, init_decls)
        cnt = self.names.fresh(names.SAVED_PREFIX, ULONG)
        inc_rev = [x for k in reversed(range(len(s.inc)))
                   for x in self.rev_stmt(s.inc[k], p + (2, k))]
        loop = ir.Loop((ir.Decl(cnt, ir.TapePop(ULONG)),), cnt,
                       (ir.Assign("-=", cnt, ir.Const("1", ir.INT)),),
                       ir.Block(tuple(inc_rev + body)), s.loc)
        return [ir.Block(tuple(pre + [loop] + init_rev))]

    def _rev_stepped(self, s: ir.Loop, p, canon, body, init_decls, init_rev) -> list:
        """The reverse of a canonical loop moving by c != 1: from its last value back to its
        first, `for (v = last; v >= lo; v -= c)` (counting down: the mirror image). An unsigned
        counter would wrap below lo instead of leaving the loop (from lo < c: `v >= 0` never
        fails), so a counter not known to be signed gets `T _tK = last; for (T v = _tK; v >= lo
        && v <= _tK; v -= c)`: a wrapped v is above the last value (`v >= 0` left out where v
        is known to be unsigned)."""
        v, c, L = canon.var, ir.Const(str(canon.step), ir.INT), ir.INT
        one = ir.Const("1", L)
        last = None
        if canon.up:         # last = lo + (hi - lo - 1) / c * c, when hi > lo
            span = ir.Binary("-", ir.Binary("-", canon.hi_running(), canon.lo, L), one, L)
            head = ir.Binary("+", canon.lo, ir.Binary("*", ir.Binary("/", span, c, L), c, L), L)
            runs = ir.Binary(">", canon.hi, canon.lo, ir.BOOL)
            cond, op = ir.Binary(">=", v, canon.lo, ir.BOOL), "-="
            if not is_signed(v.type):
                last = ir.Decl(self.names.fresh(names.SAVED_PREFIX, v.type), head)
                head = last.var
                below = ir.Binary("<=", v, last.var, ir.BOOL)
                cond = below if is_zero_literal(canon.lo) and is_unsigned(v.type) else \
                    ir.Binary("&&", cond, below, ir.BOOL)
        else:                # first value reached from below: lo - (lo - hi) / c * c
            span = ir.Binary("-", canon.lo, canon.hi, L)
            head = ir.Binary("-", canon.lo, ir.Binary("*", ir.Binary("/", span, c, L), c, L), L)
            runs = ir.Binary(">=", canon.lo, canon.hi, ir.BOOL)
            cond, op = ir.Binary("<=", v, canon.lo, ir.BOOL), "+="
        loop = ir.Loop((ir.Decl(v, head),), cond, (ir.Assign(op, v, c),),
                       ir.Block(tuple(body)), s.loc)
        others = [d for d in init_decls if d.var.uid != v.uid]
        pre = self.scope_restores(p, others)
        block = (loop,) if last is None else (last, loop)
        return pre + [ir.If(runs, ir.Block(block))] + init_rev
