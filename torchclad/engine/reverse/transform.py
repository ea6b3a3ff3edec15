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

from .. import ir, names
from ..analysis.activity import reads_of
from ..analysis.effects import call_writes, global_effects, memory_params
from ..analysis.regions import Regions
from ..analysis.tbr import Facts
from ..errors import DiffError
from ..rules import math as rules
from . import checkpoint
from .adjoint import ZERO, AdjointRules, Names, div, mul, neg
from .calls import TAPE, Callee, Parts, call_parts, template_args  # noqa: F401 (re-exported)
from .loops import canonical

ULONG = ir.Type("unsigned long")


class Reverse:
    def __init__(self, module: ir.Module, fn: ir.Function, activity, adj_names: dict,
                 request_callee, options, adjoint_params: frozenset = frozenset()):
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
        self.derivative_reads: list = []   # (path, statement, keys it reads) of derivative code
        self.taken_loops = None            # running-max indices -> their loops (parallel.taken)
        self.memory_writes: dict = {}      # (path, memory key) -> the target written
        self.seed = ir.Var(names.RESULT_ADJOINT, ir.Type(fn.ret.base, 0, False, (), True), 0)
        # an active scalar parameter that the body overwrites gets a local adjoint, added to
        # the caller's *_d_x at the end (when the caller passes one: `adjoint_params`, uids of
        # the parameters with an adjoint buffer), so that buffer still only accumulates
        self.adjoint_params = adjoint_params
        # the non-const globals fn or its callees read / write (tracked like top-scope locals)
        self.global_reads, self.global_writes = global_effects(module, fn)
        assigned = overwritten(fn, self.al, module)
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
        for u in sorted(self.global_reads | self.global_writes, reverse=True):
            g = self.al.vars.get(u)        # a global: a local of the top scope too
            if g is not None:
                f.globals.add(u)
                f.decls.append(((-1,), (), ir.Decl(g)))
                f.scope_of[self.al.mem_key(g)] = ()
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
        if self.options.analyses:
            self._regions()
        return f

    def _regions(self) -> None:
        """The elements each derivative read and each memory write touch (analysis/regions.py):
        (path, key) pairs all of whose uses come from derivative code get their accesses."""
        f = self.facts
        reg = Regions(self.fn, self.canon, self.al)
        found: dict = {}
        for p, st, ks in self.derivative_reads:
            for x in ir.walk_stmts(st):
                for e in ir.stmt_exprs(x):
                    for node in ir.walk_expr(e):
                        if isinstance(node, ir.Index) or (isinstance(node, ir.Unary) and
                                                          node.op == "*"):
                            r = self.al.root_of(node)
                            if r is not None and r.uid > 0 and r.type.is_memory:
                                k = self.al.mem_key(r)
                                found.setdefault((p, k), []).append(reg.access(node))
            for k in ks:
                if k[0] == "mem":
                    found.setdefault((p, k), [None])       # read some other way
        tracked = {}
        for p, st, ks in self.derivative_reads:
            for k in ks:
                tracked[(p, k)] = tracked.get((p, k), 0) + 1
        total = {}
        for pk in f.uses:
            total[pk] = total.get(pk, 0) + 1
        for pk, accs in found.items():
            f.use_regions[pk] = accs if total.get(pk, 0) <= tracked.get(pk, 0) else accs + [None]
        for pk, t in self.memory_writes.items():
            f.write_regions[pk] = reg.access(t)
        f.regions = reg

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
            f.ifs.add(p)
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
            ks = self._stmt_reads(st)
            for k in ks:
                f.uses.append((p, k))
            self.derivative_reads.append((p, st, ks))
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
                if key[0] == "mem":
                    self.memory_writes[(p, key)] = t
        call = self.user_call(s)
        if call is not None and self.calls.get(p, (None, None))[1] is not None:
            # the callee's reverse sweep reads the arrays its primal reads, as they were at
            # the call
            callee = self.module.functions.get(ir.function_key(call.fn))
            read = memory_params(callee)[0] if callee is not None else \
                set(range(len(call.args)))
            for i in read:
                a = call.args[i]
                r = self.al.root_of(a) if a.type.is_memory else None
                if r is not None and r.uid > 0:
                    f.uses.append((p, self.al.mem_key(r)))
        if call is not None and call.user:
            # the globals the callee reads (its sweep may too) and writes
            callee = self.module.functions.get(ir.function_key(call.fn))
            gread, gwritten = global_effects(self.module, callee) if callee else ((), ())
            for u in sorted(set(gread) | set(gwritten)):
                if u in self.al.vars:
                    f.uses.append((p, self.al.mem_key(self.al.vars[u])))
            for u in sorted(gwritten):
                if u in self.al.vars:
                    key = self.al.mem_key(self.al.vars[u])
                    (f.assigned.setdefault(key, []).append(p) if key[0] == "var"
                     else mem_written.add(key))
                    f.writes.append((p, key, frozenset({("call",)})))
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
            if id(x) in addressed and isinstance(x, (ir.Index, ir.Unary, ir.Member)):
                continue
            if isinstance(x, ir.Var) and (x.uid > 0 or x.uid in self.facts.globals):
                out.add(("var", x.uid))
            elif isinstance(x, (ir.Index, ir.Member)) or \
                    (isinstance(x, ir.Unary) and x.op == "*"):
                base = x.base if isinstance(x, (ir.Index, ir.Member)) else x.operand
                r = ir.root_var(base)
                if r is not None and (r.uid > 0 or r.uid in self.facts.globals):
                    out.add(self.al.mem_key(self.al.roots.get(r.uid, r)))
            elif isinstance(x, ir.Call) and x.user:
                callee = self.module.functions.get(ir.function_key(x.fn))
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
        if isinstance(e, ir.Call) and (e.user or self.custom_name(e)):
            return e
        return None

    def custom_name(self, call) -> str:
        name = names.pullback(ir.function_key(call.fn))
        return name if name in self.module.customs else ""

    def _parts(self, s, p) -> Parts:
        R = self.rules
        self.rules.loc = getattr(s, "loc", self.fn.loc)
        call = self.user_call(s)
        if call is not None:
            return call_parts(self, s, p, call)
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
                scaled = self._divided_in_place(s, tk)
                if scaled is not None and self.options.analyses:
                    # x = x / d:  dd -= dy * y / d, read from x before any restore (the
                    # result, not x's old value: nothing needs that), dx += dy / d
                    d = scaled
                    early: list = []
                    R.backprop(d, div(mul(neg(snap), t), d), early)
                    R.backprop(t, div(snap, d), post)
                    self.facts.result_uses.add((p, tk))
                    return Parts(pre + tuple(early), self._guard(snap, post))
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
            if s.value is None or not self.fn.ret.real or self.fn.ret.is_pointer:
                return Parts()        # no seed: an integer result cuts the derivative
            post = []
            R.backprop(s.value, self.seed, post)
            return Parts((), tuple(post))
        if isinstance(s, ir.ExprStmt):
            return Parts()
        return Parts()

    def _divided_in_place(self, s: ir.Assign, key):
        """d for `x = x / d` (`x /= d`) with d reading nothing of x's object: its derivative
        can read the result instead of x's old value."""
        v = s.value
        if not (isinstance(v, ir.Binary) and v.op == "/" and v.lhs == s.target and
                s.target.type.real and not s.target.type.is_pointer):
            return None
        if key in self.reads(v.rhs) or key in reads_of(v.rhs, self.al):
            return None
        return v.rhs

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

def overwritten(fn: ir.Function, al, module: ir.Module) -> set:
    """uids of the variables fn writes: assigned, written through a pointer or a reference
    to them, or by a call given their address."""
    out = set()
    for s in ir.walk_stmts(fn.body):
        if isinstance(s, ir.Assign):
            r = al.root_of(s.target) if not isinstance(s.target, ir.Var) else s.target
            if r is not None:
                out.add(r.uid)
        for e in ir.stmt_exprs(s):
            for x in ir.walk_expr(e):
                if isinstance(x, ir.Call) and x.user:
                    for i in call_writes(module, x):
                        r = al.root_of(x.args[i]) if i < len(x.args) else None
                        if r is not None:
                            out.add(r.uid)
    return out


def inverse(s: ir.Assign) -> "ir.Assign | None":
    """`i += c` / `i -= c` (or `i = i + c`) on an integer or a pointer with c constant:
    restored by the inverse op."""
    t = s.target
    if not (isinstance(t, ir.Var) and (t.type.is_pointer or not t.type.real) and
            not t.type.is_array):
        return None
    op, step = s.op, s.value
    if op == "=" and isinstance(step, ir.Binary) and step.op in ("+", "-") and \
            isinstance(step.lhs, ir.Var) and step.lhs.uid == t.uid:
        op, step = step.op + "=", step.rhs
    if op in ("+=", "-=") and isinstance(step, ir.Const):
        return ir.Assign("-=" if op == "+=" else "+=", t, step, s.loc)
    return None
