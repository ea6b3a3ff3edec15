"""Statement-level reverse mode: split a normalized function into a forward sweep that
records what the reverse needs and a reverse sweep that runs the adjoint statements in
reverse order.

Three steps, as the driver calls them:
1. `collect`: one walk that builds each leaf statement's adjoint code (`Parts`) and the
   facts the to-be-recorded analysis needs (uses, writes, declarations, loops).
2. the analysis (analysis/tbr.py) decides what to record and what to recompute.
3. `forward` / `reverse`: assemble the two sweeps with the analysis' answers.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .. import ir, names
from ..analysis.activity import reads_of
from ..analysis.effects import call_writes, memory_params
from ..analysis.tbr import Facts
from ..errors import DiffError
from ..rules import math as rules
from . import checkpoint
from .adjoint import ZERO, AdjointRules, Names, neg
from .loops import canonical

ULONG = ir.Type("unsigned long")
#: the tape every generated forward records on and every sweep reads back
TAPE = ir.Var(names.TAPE, ir.Type("torchclad::Tape"), 0)


@dataclass(frozen=True)
class Parts:
    """Adjoint code of one statement: pre runs before the restore of the overwritten value,
    post after it."""
    pre: tuple = ()
    post: tuple = ()

    @property
    def empty(self) -> bool:
        return not self.pre and not self.post


@dataclass(frozen=True)
class Callee:
    forw: str            # name of the callee's augmented forward
    sweep: str           # name of its reverse sweep
    custom: str = ""     # clad::custom_derivatives pullback name, if one is used
    custom_all_params: bool = True


class Reverse:
    def __init__(self, module: ir.Module, fn: ir.Function, activity, adj_names: dict,
                 request_callee, options):
        self.module = module
        self.fn = fn
        self.act = activity
        self.al = activity.aliases
        self.adj_names = adj_names
        self.request_callee = request_callee
        self.options = options
        self.snip_names = Names({})
        self.rules = AdjointRules(fn, activity, adj_names, self.snip_names, module.customs,
                                  options)
        self.parts: dict = {}          # path -> Parts
        self.calls: dict = {}          # path -> (Call, Callee | None, mask)
        self.canon: dict = {}          # loop path -> CanonLoop
        self.checkpoints: dict = {}    # loop path -> checkpoint.Plan
        self.facts = Facts()
        self.seed = ir.Var(names.RESULT_ADJOINT, ir.Type(fn.ret.base, 0, False, (), True), 0)
        # an active scalar parameter that the body overwrites gets a local adjoint, added to
        # the caller's *_d_x at the end, so the caller's buffer still only accumulates
        assigned = {s.target.uid for s in ir.walk_stmts(fn.body)
                    if isinstance(s, ir.Assign) and isinstance(s.target, ir.Var)}
        self.local_param_adj = {}
        for p in fn.params:
            if p.uid in assigned and p.type.is_real_scalar and activity.var_active(p):
                self.local_param_adj[p.uid] = (
                    ir.Var("_dl_" + p.name, ir.Type(p.type.base, 0, False, (), True), 0), p)
        self.rules.local_param_adj = self.local_param_adj

    # ================================================================== 1. collect
    def collect(self) -> Facts:
        f = self.facts
        f.write_once = {("mem", u) for u in self.fn.write_once}
        for p in self.fn.params:
            f.params.add(p.uid)
            if not p.type.is_pointer:     # a scalar parameter is a local of the top scope
                f.decls.append(((-1,), (), ir.Decl(p)))
            f.scope_of[("var", p.uid)] = ()
            if p.type.is_memory:
                f.scope_of[("mem", p.uid)] = ()
        for st in ir.walk_stmts(self.fn.body):
            for e in ir.stmt_exprs(st):
                for x in ir.walk_expr(e):
                    if isinstance(x, ir.Unary) and x.op == "&":
                        r = ir.root_var(x.operand)
                        if r is not None and not r.type.is_memory:
                            f.address_taken.add(("var", r.uid))
        mem_written: set = set()
        self._collect_block(self.fn.body, (), mem_written)
        # a reassigned pointer into a local may be stored; the sweep rebuilds it from that local
        # (at the end of the pointer's scope, where the sweep declares it)
        for key in {k for _, k in f.uses if k[0] == "var" and k in f.assigned}:
            v, r = self.al.vars.get(key[1]), self.al.roots.get(key[1])
            if v is not None and r is not None and v.type.is_pointer and r.uid != v.uid and \
                    r.uid not in f.params and r.uid > 0:
                scope = f.scope_of.get(key, ())
                f.uses.append((f.scopes.get(scope, scope + (10 ** 6,)), self.al.mem_key(r)))
        for v in self.al.vars.values():
            if v.type.is_memory:
                k = ("mem", v.uid)
                if k not in mem_written:
                    f.readonly_mem.add(k)
        return f

    def _collect_block(self, b: ir.Block, path: tuple, mem_written: set):
        f = self.facts
        f.scopes[path] = path + (len(b.stmts),)
        for i, s in enumerate(b.stmts):
            self._collect_stmt(s, path + (i,), path, mem_written)

    def _declare(self, d: ir.Decl, path: tuple, scope: tuple):
        f = self.facts
        f.decls.append((path, scope, d))
        f.scope_of[("var", d.var.uid)] = scope
        if d.var.type.is_array:
            f.scope_of[("mem", d.var.uid)] = scope

    def _collect_stmt(self, s, p: tuple, scope: tuple, mem_written: set):
        f = self.facts
        if isinstance(s, ir.Decl):
            self._declare(s, p, scope)
            self._leaf(s, p, mem_written)
        elif isinstance(s, (ir.Assign, ir.ExprStmt, ir.Return)):
            self._leaf(s, p, mem_written)
        elif isinstance(s, ir.Block):
            self._collect_block(s, p, mem_written)
        elif isinstance(s, ir.If):
            self._collect_block(s.then, p + (0,), mem_written)
            self._collect_block(s.other, p + (1,), mem_written)
        elif isinstance(s, ir.Loop):
            f.loops.append(p)
            f.scopes[p] = p + (3,)
            c = canonical(s, self)
            for k, st in enumerate(s.init):
                if c is not None:
                    # the reverse loop header provides the counter: no save, no restore
                    f.scope_of[("var", c.var.uid)] = p
                    self.parts[p + (0, k)] = Parts()
                    continue
                if isinstance(st, ir.Decl):
                    self._declare(st, p + (0, k), p)
                self._leaf(st, p + (0, k), mem_written)
            self._collect_block(s.body, p + (1,), mem_written)
            for k, st in enumerate(s.inc):
                if c is not None:
                    self.parts[p + (2, k)] = Parts()
                    continue
                self._leaf(st, p + (2, k), mem_written)
            if c is not None:
                self.canon[p] = c
                for e in (c.lo, c.hi):
                    for k in self.reads(e):
                        f.uses.append((p + (3,), k))
            if checkpoint.is_checkpoint(s):
                plan = checkpoint.plan(self, s, p)
                self.checkpoints[p] = plan
                f.uses.extend((p, k) for k in plan.uses)
        elif isinstance(s, (ir.Comment,)):
            pass
        else:
            raise DiffError(getattr(s, "loc", None), f"internal: unexpected {type(s).__name__}")

    def _leaf(self, s, p: tuple, mem_written: set):
        f = self.facts
        parts = self._parts(s, p)
        self.parts[p] = parts
        for st in parts.pre + parts.post:
            for k in self._stmt_reads(st):
                f.uses.append((p, k))
        if isinstance(s, ir.Assign):
            t = s.target
            if isinstance(t, ir.Var):
                key = ("var", t.uid)
                restore = set()
                inv = inverse(s)
                if inv is not None:
                    restore = self.reads(inv.value)
                f.writes.append((p, key, frozenset(restore)))
                f.assigned.setdefault(key, []).append(p)
            else:
                r = self.al.root_of(t)
                if r is None:
                    raise DiffError(s.loc, "cannot tell which array this assignment writes")
                key = self.al.mem_key(r)
                if key[0] == "var":
                    f.assigned.setdefault(key, []).append(p)
                else:
                    mem_written.add(key)
                restore = {("var", v) for v in ir.vars_in(t) if v > 0}
                f.writes.append((p, key, frozenset(restore)))
        call = self.user_call(s)
        if call is not None and self.calls.get(p, (None, None))[1] is not None:
            # the callee's reverse sweep reads the arrays its primal reads, as they were at
            # the call
            callee = self.module.functions.get(ir.call_name(call.fn))
            read = memory_params(callee)[0] if callee is not None else \
                set(range(len(call.args)))
            for i in read:
                a = call.args[i]
                r = self.al.root_of(a) if a.type.is_memory else None
                if r is not None and r.uid > 0:
                    f.uses.append((p, self.al.mem_key(r)))
        if call is not None:
            written = call_writes(self.module, call)
            for i in written:
                r = self.al.root_of(call.args[i])
                if r is not None:
                    key = self.al.mem_key(r)
                    mem_written.add(key)
                    if key[0] == "var":
                        f.assigned.setdefault(key, []).append(p)
                    f.writes.append((p, key, frozenset({("call",)})))

    def describe(self, path: tuple) -> str:
        """`line N: <statement>` for the statement or block at a path (printers use it)."""
        from ..emit.cpp import Printer
        node = self.fn.body
        i = 0
        while i < len(path):
            k = path[i]
            if isinstance(node, ir.Block):
                if k < 0 or k >= len(node.stmts):
                    return "parameters" if k < 0 else "end of block"
                node, i = node.stmts[k], i + 1
            elif isinstance(node, ir.If):
                node, i = (node.then if k == 0 else node.other), i + 1
            elif isinstance(node, ir.Loop):
                part = (node.init, None, node.inc)[k] if k in (0, 2) else None
                if k == 1:
                    node, i = node.body, i + 1
                elif k == 3:
                    return "end of loop"
                else:
                    node, i = part[path[i + 1]], i + 2
            else:
                break
        line = getattr(node, "loc", None)
        where = f"line {line.line}: " if line is not None and line.line else ""
        if isinstance(node, (ir.Decl, ir.Assign, ir.ExprStmt)):
            return where + Printer().stmt(node, 0)[0].strip()
        if isinstance(node, ir.Loop):
            return where + "loop"
        if isinstance(node, ir.Block):
            return where + ("function body" if path == () else "block")
        return where + type(node).__name__.lower()

    # ------------------------------------------------------------------ reads
    def reads(self, e) -> set:
        """Object keys generated code reads: primal variables (any type) and primal
        memory (through p[i] or *p)."""
        out = set()
        # p[i] / *p under & only compute an address: they read no memory
        addressed = {id(y) for x in ir.walk_expr(e) if isinstance(x, ir.Unary) and x.op == "&"
                     for y in [x.operand]}
        for x in ir.walk_expr(e):
            if id(x) in addressed and isinstance(x, (ir.Index, ir.Unary)):
                continue
            if isinstance(x, ir.Var) and x.uid > 0:
                out.add(("var", x.uid))
            elif isinstance(x, ir.Index) or (isinstance(x, ir.Unary) and x.op == "*"):
                base = x.base if isinstance(x, ir.Index) else x.operand
                r = ir.root_var(base)
                if r is not None and r.uid > 0:
                    out.add(self.al.mem_key(self.al.roots.get(r.uid, r)))
            elif isinstance(x, ir.Call) and x.user:
                callee = self.module.functions.get(ir.call_name(x.fn))
                read = memory_params(callee)[0] if callee is not None else \
                    set(range(len(x.args)))
                for i, a in enumerate(x.args):
                    if a.type.is_memory and i in read:
                        r = self.al.root_of(a)
                        if r is not None and r.uid > 0:
                            out.add(self.al.mem_key(r))
        # &y needs y to exist in the reverse, not its value: ('addr', uid)
        for x in ir.walk_expr(e):
            if isinstance(x, ir.Unary) and x.op == "&" and isinstance(x.operand, ir.Var) \
                    and x.operand.uid > 0:
                out.discard(("var", x.operand.uid))
                out.add(("addr", x.operand.uid))
        return out

    def _stmt_reads(self, st) -> set:
        out = set()
        for x in ir.walk_stmts(st):
            for e in ir.stmt_exprs(x):
                out |= self.reads(e)
        return out

    # ------------------------------------------------------------------ adjoint code
    def user_call(self, s):
        """The user function (or custom-derivative) call a leaf statement makes, if any."""
        e = None
        if isinstance(s, ir.Decl):
            e = s.init
        elif isinstance(s, ir.Assign):
            e = s.value
        elif isinstance(s, ir.ExprStmt):
            e = s.expr
        if isinstance(e, ir.Call) and (e.user or self._custom_name(e)):
            return e
        return None

    def _custom_name(self, call) -> str:
        name = names.pullback(ir.call_name(call.fn).split("::")[-1])
        return name if name in self.module.customs else ""

    def _parts(self, s, p) -> Parts:
        R = self.rules
        self.rules.loc = getattr(s, "loc", self.fn.loc)
        call = self.user_call(s)
        if call is not None:
            return self._call_parts(s, p, call)
        if isinstance(s, ir.Decl):
            if not s.var.type.real or s.var.type.is_pointer:
                return Parts()
            if not self.act.var_active(s.var):
                return Parts()
            post: list = []
            if s.var.type.is_array:
                adj = R.adj_root(s.var)[0]
                for k, e in enumerate(s.init_list):
                    R.backprop(e, ir.Index(adj, ir.Const(str(k), ir.INT), e.type), post)
            elif s.init is not None:
                result = s.var if isinstance(s.init, ir.Call) else None
                R.backprop(s.init, R.adj_var(s.var), post, result)
                return Parts((), self._guard(R.adj_var(s.var), post))
            return Parts((), tuple(post))
        if isinstance(s, ir.Assign):
            t = s.target
            if not R.target_active(t):
                return Parts()
            adj = R.adj_lvalue(t)
            tk = ("var", t.uid) if isinstance(t, ir.Var) else \
                self.al.mem_key(self.al.root_of(t))
            if s.op == "=":
                if not self.act.expr_active(s.value):
                    # y = <constant>: the old value's adjoint is simply gone
                    return Parts((ir.Assign("=", adj, ZERO),), ())
                snap = self.snip_names.fresh(names.ADJOINT_TEMP_PREFIX, adj.type)
                pre = (ir.Decl(snap, adj), ir.Assign("=", adj, ZERO))
                post: list = []
                R.backprop(s.value, snap, post, self._stored_result(s, tk))
                return Parts(pre, self._guard(snap, post))
            if s.op in ("+=", "-="):
                d = adj
                pre: tuple = ()
                if tk in reads_of(s.value, self.al):
                    snap = self.snip_names.fresh(names.ADJOINT_TEMP_PREFIX, adj.type)
                    pre = (ir.Decl(snap, adj),)
                    d = snap
                post = []
                R.backprop(s.value, d if s.op == "+=" else neg(d), post)
                return Parts(pre, tuple(post))
            raise DiffError(s.loc, f"operator {s.op} on a floating value is not supported")
        if isinstance(s, ir.Return):
            if s.value is None or self.fn.ret.base == "void":
                return Parts()
            post = []
            R.backprop(s.value, self.seed, post)
            return Parts((), tuple(post))
        if isinstance(s, ir.ExprStmt):
            return Parts()
        return Parts()

    def _stored_result(self, s: ir.Assign, key):
        """`M[e] = f(u)` into write-once memory, f a rule whose derivative is spelled with its
        result (exp, tanh, sqrt, ...): the reverse reads the result back from M[e] instead of
        computing f(u) again. Write-once memory is never overwritten nor restored, so M[e]
        still holds it when the reverse runs (the read is a use like any other)."""
        v = s.value
        if not (isinstance(v, ir.Call) and not v.user and key in self.facts.write_once
                and isinstance(s.target, ir.Index)):
            return None
        rule = rules.lookup(ir.call_name(v.fn))
        if rule is None or not rule.uses_result:
            return None
        return s.target

    def _guard(self, snap, post) -> tuple:
        """With analyses off, skip propagating a zero adjoint (so that inactive code with an
        infinite partial, e.g. an unused acos(-2), cannot turn 0 into NaN)."""
        if self.options.analyses or not post:
            return tuple(post)
        return (ir.If(ir.Binary("!=", snap, ZERO, ir.BOOL), ir.Block(tuple(post))),)

    def _call_parts(self, s, p, call) -> Parts:
        R = self.rules
        name = ir.call_name(call.fn)
        callee_fn = self.module.functions.get(name)
        custom = self._custom_name(call)
        if callee_fn is None and not custom:
            if name in self.module.broken:
                raise self.module.broken[name]
            raise DiffError(s.loc, f"no definition or custom derivative for '{name}'")
        n = len(call.args)
        mask = []
        for i, a in enumerate(call.args):
            if a.type.is_memory:
                r = self.al.root_of(a)
                if r is None and a.type.real and not ir.is_null(a):
                    raise DiffError(s.loc, f"cannot tell which array argument {i + 1} of "
                                           f"'{name}' points into; pass a parameter or local "
                                           "array plus an offset")
                act = a.type.real and r is not None and self.act.is_active(self.al.mem_key(r))
            else:
                act = self.act.expr_active(a)
            if act:
                mask.append(i)
        target = s.var if isinstance(s, ir.Decl) else (s.target if isinstance(s, ir.Assign)
                                                        else None)
        tgt_active = target is not None and R.target_active(target)
        if not mask and not tgt_active:
            self.calls[p] = (call, None, ())
            return Parts()
        info = self.request_callee(name, tuple(mask), s.loc, bool(custom))
        self.calls[p] = (call, info, tuple(mask))
        pre: list = []
        post: list = []
        ret_real = call.type.real and not call.type.is_pointer
        if callee_fn is not None:
            ret_real = callee_fn.ret.real and not callee_fn.ret.is_pointer
        d = ir.Cast(ZERO, call.type.value(), "fn") if ret_real else None
        if tgt_active:
            adj = R.adj_lvalue(target) if not isinstance(s, ir.Decl) else R.adj_var(s.var)
            snap = self.snip_names.fresh(names.ADJOINT_TEMP_PREFIX, adj.type)
            pre = [ir.Decl(snap, adj), ir.Assign("=", adj, ZERO)]
            d = snap
        params = callee_fn.params if callee_fn is not None else \
            self.module.customs[custom].params[:n]
        adj_args, scalars = self._adjoint_args(call, callee_fn, params, mask, info, post)
        targs = template_args(call.fn)
        if info.custom:
            args = call.args + ((d,) if ret_real else ()) + tuple(adj_args)
            fn_text = "clad::custom_derivatives::" + info.custom + targs
        else:
            args = call.args + ((d,) if ret_real else ()) + tuple(adj_args) + (TAPE,)
            fn_text = info.sweep + targs
        post.append(ir.ExprStmt(ir.Call(fn_text, tuple(args), ir.VOID, False)))
        for i, tmp in scalars.items():
            R.backprop(call.args[i], tmp, post)
        return Parts(tuple(pre), tuple(post))

    def _adjoint_args(self, call, callee_fn, params, mask, info, post: list) -> tuple:
        """The adjoint arguments of a call's sweep (or custom pullback), and the temporaries
        (argument index -> local) that receive the adjoints of its active scalar arguments
        (their declarations are appended to post)."""
        R = self.rules
        scalars = {}
        adj_args = []
        for i, a in enumerate(call.args):
            pt = params[i].type if i < len(params) else a.type
            real_param = pt.real
            if i in mask:
                if a.type.is_memory:
                    adj_args.append(R.adj_ptr(a))
                else:
                    base = pt.base
                    if callee_fn is not None and base in callee_fn.template:
                        base = a.type.base if a.type.real else "double"
                    tmp = self.snip_names.fresh(names.CALL_ADJOINT_PREFIX, ir.Type(base, 0, False, (), True))
                    post.append(ir.Decl(tmp, ir.Cast(ZERO, tmp.type, "fn")))
                    scalars[i] = tmp
                    adj_args.append(ir.Unary("&", tmp, tmp.type.pointer_to()))
            elif info.custom and (info.custom_all_params or real_param):
                # a typed null, so a template custom pullback still deduces its T
                # the argument's own type, spelled in the caller (a template caller's T)
                base = a.type.base if (a.type.real or a.type.is_memory) else pt.base
                if base == "void":          # a bare nullptr: the type of the real arrays
                    base = next((x.type.base for x in call.args
                                 if x.type.real and x.type.is_memory), "double")
                nt = ir.Type(base, 1, False, (), a.type.real or base != pt.base)
                adj_args.append(ir.Cast(ir.Const("nullptr", nt), nt, "c"))
        return adj_args, scalars


def inverse(s: ir.Assign) -> "ir.Assign | None":
    """`i += c` / `i -= c` on an integer with c constant: restored by the inverse op."""
    if s.op in ("+=", "-=") and isinstance(s.target, ir.Var) and \
            (s.target.type.is_pointer or not s.target.type.real) and \
            not s.target.type.is_array and isinstance(s.value, ir.Const):
        return ir.Assign("-=" if s.op == "+=" else "+=", s.target, s.value, s.loc)
    return None


def template_args(spelled: str) -> str:
    """`<T>` of a callee spelled `f<T>` (kept on the generated calls), else ''."""
    m = re.search(r"(<.*>)\s*$", spelled)
    return m.group(1) if m else ""
