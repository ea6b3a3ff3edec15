"""Normalize a function so the reverse transform only sees structured code.

After this pass a function body has only: Decl, Assign (=, +=, -= on floating targets),
ExprStmt (a call), Block, If, Loop (no do-while) and at most one Return, as the last
top-level statement. The rewrites:

- `break` / `continue` / early `return` set flags; the rest of the enclosing statements is
  guarded by `if (!flag)` and loop conditions test the flags first.
- `switch` becomes a chain of guarded ifs with a fall-through flag.
- `do body while (c)` becomes `first = true; while (first || c) { first = false; body }`.
- `v *= e` and `v /= e` on floating values become `v = v * (e)` and `v = v / (e)`.
- a call to a user function nested inside a larger expression is hoisted into a local.
- a loop step held by an integer local that only its literal initializer sets
  (`const int UNROLL = 8; ... i += UNROLL`) is spelled as that literal (`literal_steps`).
"""
from __future__ import annotations

from dataclasses import replace

from . import ir, lastwrite, names, rewrite
from .errors import DiffError
from .reverse.loops import step_of

TRUE = ir.Const("true", ir.BOOL)
FALSE = ir.Const("false", ir.BOOL)


def _not(e):
    return ir.Unary("!", e, ir.BOOL)


def _or(es):
    es = list(es)
    out = es[0]
    for e in es[1:]:
        out = ir.Binary("||", out, e, ir.BOOL)
    return out


def _and(es):
    es = [e for e in es if e is not None]
    out = es[0]
    for e in es[1:]:
        out = ir.Binary("&&", out, e, ir.BOOL)
    return out


def _direct(stmts, kind) -> bool:
    """Whether a statement list holds `kind` (Break/Continue) not nested in an inner loop
    (and, for Break, not in an inner switch)."""
    for s in stmts:
        if isinstance(s, kind):
            return True
        if isinstance(s, ir.Block) and _direct(s.stmts, kind):
            return True
        if isinstance(s, ir.If) and (_direct(s.then.stmts, kind) or _direct(s.other.stmts, kind)):
            return True
        if isinstance(s, ir.Switch) and kind is ir.Continue and _direct(s.body.stmts, kind):
            return True
    return False


def literal_steps(body: ir.Block) -> ir.Block:
    """body with a loop's step that an integer local holds (initialised with a positive
    literal; nothing assigns it or takes its address) spelled as that literal:
    `const int UNROLL = 8; ... i += UNROLL` as `i += 8` (llm.c's LOOP_UNROLL), so that the
    loop is canonical (reverse/loops.py) and its pragma kept."""
    assigned, taken, held = set(), set(), {}
    for s in ir.walk_stmts(body):
        if isinstance(s, ir.Assign) and isinstance(s.target, ir.Var):
            assigned.add(s.target.uid)
        for e in ir.stmt_exprs(s):
            taken |= {x.operand.uid for x in ir.walk_expr(e) if isinstance(x, ir.Unary) and
                      x.op == "&" and isinstance(x.operand, ir.Var)}
        if isinstance(s, ir.Decl) and not s.var.type.real and not s.var.type.is_memory and \
                not s.var.type.dims and not s.var.type.ref:
            init = s.init.operand if isinstance(s.init, ir.Cast) and \
                not s.init.operand.type.real else s.init
            if step_of(init) is not None:
                held[s.var.uid] = init
    held = {u: c for u, c in held.items() if u not in assigned and u not in taken}
    if not held:
        return body

    def stmt(s):
        if isinstance(s, ir.Block):
            return replace(s, stmts=tuple(stmt(x) for x in s.stmts))
        if isinstance(s, ir.If):
            return replace(s, then=stmt(s.then), other=stmt(s.other))
        if isinstance(s, ir.Switch):
            return replace(s, body=stmt(s.body))
        if not isinstance(s, ir.Loop):
            return s
        inc = tuple(replace(a, value=held[a.value.uid])
                    if isinstance(a, ir.Assign) and a.op in ("+=", "-=") and
                    isinstance(a.value, ir.Var) and a.value.uid in held else a for a in s.inc)
        return replace(s, inc=inc, body=stmt(s.body))
    return stmt(body)


class Normalizer:
    def __init__(self, fn: ir.Function):
        self.fn = fn
        self.uid = max([v.uid for v in fn.params] +
                       [s.var.uid for s in ir.walk_stmts(fn.body) if isinstance(s, ir.Decl)] +
                       [0]) + 1000
        self.counts: dict = {}
        self.ret_flag = None
        self.ret_var = None

    def var(self, prefix: str, typ: ir.Type) -> ir.Var:
        n = self.counts.get(prefix, 0)
        self.counts[prefix] = n + 1
        self.uid += 1
        return ir.Var(prefix + str(n), typ, self.uid)

    # -------------------------------------------------------------- entry
    def run(self) -> ir.Function:
        body = self.simplify_ops(self.copy_moved_params(self.fn.body))
        body = literal_steps(body)
        body = lastwrite.rewrite_block(body, self.var)
        returns = [s for s in ir.walk_stmts(body) if isinstance(s, ir.Return)]
        tail = bool(body.stmts) and isinstance(body.stmts[-1], ir.Return)
        if self.fn.ret.base != "void" and not returns:
            raise DiffError(self.fn.loc, f"'{self.fn.name}' returns a value but has no return "
                                         "statement")
        flags_mode = len(returns) > 1 or (len(returns) == 1 and not tail)
        if flags_mode:
            self.uid += 1
            self.ret_flag = ir.Var(names.RETURN_FLAG, ir.BOOL, self.uid)
            pre = [ir.Decl(self.ret_flag, FALSE)]
            if self.fn.ret.base != "void":
                self.uid += 1
                rt = self.fn.ret.value()
                self.ret_var = ir.Var(names.RETURN_VALUE, rt, self.uid)
                pre.append(ir.Decl(self.ret_var, ir.Cast(ir.Const("0", ir.INT), rt, "fn")))
            stmts, _ = self.seq(list(body.stmts), (None, None))
            stmts = pre + stmts
            if self.ret_var is not None:
                stmts.append(ir.Return(self.ret_var))
        else:
            stmts, _ = self.seq(list(body.stmts), (None, None))
        return replace(self.fn, body=ir.Block(tuple(stmts), body.loc))

    def copy_moved_params(self, body: ir.Block) -> ir.Block:
        """A pointer parameter the body reassigns (`arr = arr + 1`, `++p`) is copied into a
        local first and the body uses the copy: a pointer into the parameter's memory like
        any other, whose adjoint is the parameter's adjoint at the same offset."""
        moved = {s.target.uid for s in ir.walk_stmts(body)
                 if isinstance(s, ir.Assign) and isinstance(s.target, ir.Var)
                 and s.target.type.is_pointer}
        copies, decls = {}, []
        for p in self.fn.params:
            if p.uid in moved and p.type.is_pointer:
                self.uid += 1
                v = ir.Var(names.moved_param(p.name), p.type, self.uid)
                copies[p.uid] = v
                decls.append(ir.Decl(v, p, (), self.fn.loc))
        if not copies:
            return body
        new = rewrite.substitute_vars(body, copies)
        return replace(new, stmts=tuple(decls) + new.stmts)

    # -------------------------------------------------------------- operators and calls
    def simplify_ops(self, b: ir.Block) -> ir.Block:
        out = []
        for s in b.stmts:
            out.extend(self.ops_stmt(s))
        return ir.Block(tuple(out), b.loc)

    def ops_stmt(self, s) -> list:
        pre: list = []
        self.loc = getattr(s, "loc", self.fn.loc)
        if isinstance(s, ir.Assign):
            value = self.hoist(s.value, pre, top=(s.op == "="))
            target = self.hoist(s.target, pre, top=False)
            if s.op in ("*=", "/=") and target.type.real:
                value = ir.Binary(s.op[0], target, value, target.type)
                return pre + [ir.Assign("=", target, value, s.loc)]
            return pre + [ir.Assign(s.op, target, value, s.loc)]
        if isinstance(s, ir.Decl):
            init = self.hoist(s.init, pre, top=True) if s.init is not None else None
            lst = tuple(self.hoist(e, pre, top=False) for e in s.init_list)
            return pre + [replace(s, init=init, init_list=lst)]
        if isinstance(s, ir.ExprStmt):
            e = s.expr
            if isinstance(e, ir.Call):
                e = replace(e, args=tuple(self.hoist(a, pre, top=False) for a in e.args))
            return pre + [ir.ExprStmt(e, s.loc)]
        if isinstance(s, ir.Return):
            if s.value is None:
                return [s]
            return pre + [ir.Return(self.hoist(s.value, pre, top=False), s.loc)]
        if isinstance(s, ir.If):
            c = self.hoist(s.cond, pre, top=False)
            return pre + [ir.If(c, self.simplify_ops(s.then), self.simplify_ops(s.other), s.loc)]
        if isinstance(s, ir.Loop):
            if s.cond is not None and _has_user_call(s.cond):
                raise DiffError(s.loc, "a call to a user function in a loop condition is not "
                                       "supported; compute it into a variable inside the loop")
            init = [x for i in s.init for x in self.ops_stmt(i)]
            inc = [x for i in s.inc for x in self.ops_stmt(i)]
            return [replace(s, init=tuple(init), inc=tuple(inc), body=self.simplify_ops(s.body))]
        if isinstance(s, ir.Block):
            return [self.simplify_ops(s)]
        if isinstance(s, ir.Switch):
            return [replace(s, cond=self.hoist(s.cond, pre, top=False),
                            body=self.simplify_ops(s.body))]
        return [s]

    def hoist(self, e, pre: list, top: bool):
        """Move user calls out of e into locals declared in `pre` (the call itself stays
        when it is the whole right-hand side, `top`)."""
        if e is None:
            return e
        if isinstance(e, ir.Call) and e.user:
            args = tuple(self.hoist(a, pre, top=False) for a in e.args)
            call = replace(e, args=args)
            if top:
                return call
            if e.type.base == "void":
                raise DiffError(self.loc, f"void function '{e.fn}' used as a value")
            v = self.var(names.CALL_RESULT, e.type if e.type.ref else e.type.value())
            pre.append(ir.Decl(v, call, (), self.loc))
            return v
        if isinstance(e, ir.Cond) and (_has_user_call(e.then) or _has_user_call(e.other)):
            # c ? f(x) : g(y)  ->  T v; if (c) v = f(x); else v = g(y);
            cond = self.hoist(e.cond, pre, top=False)
            v = self.var(names.CALL_RESULT, e.type.value())
            pre.append(ir.Decl(v, ir.Cast(ir.Const("0", ir.INT), v.type, "fn"), (), self.loc))
            branches = []
            for side in (e.then, e.other):
                bpre: list = []
                value = self.hoist(side, bpre, top=True)
                branches.append(ir.Block(tuple(bpre + [ir.Assign("=", v, value, self.loc)])))
            pre.append(ir.If(cond, branches[0], branches[1], self.loc))
            return v
        if isinstance(e, ir.Binary) and e.op in ("&&", "||") and _has_user_call(e.rhs):
            # a && f(x)  ->  bool v = a; if (v) v = f(x);   (|| tests !v)
            v = self.var(names.CALL_RESULT, ir.BOOL)
            pre.append(ir.Decl(v, self.hoist(e.lhs, pre, top=False), (), self.loc))
            bpre: list = []
            value = self.hoist(e.rhs, bpre, top=False)
            test = v if e.op == "&&" else ir.Unary("!", v, ir.BOOL)
            pre.append(ir.If(test, ir.Block(tuple(bpre + [ir.Assign("=", v, value, self.loc)]))))
            return v
        kids = ir.children(e)
        if not kids:
            return e
        new = tuple(self.hoist(k, pre, top=False) for k in kids)
        if new == kids:
            return e
        return ir.rebuild(e, new)

    # -------------------------------------------------------------- control flow
    def seq(self, stmts: list, ctx) -> tuple:
        out: list = []
        flags: set = set()
        for i, s in enumerate(stmts):
            new, fl = self.stmt(s, ctx)
            out.extend(new)
            if fl:
                flags |= fl
                rest, rfl = self.seq(stmts[i + 1:], ctx)
                flags |= rfl
                if rest:
                    guard = _not(_or(sorted(fl, key=lambda v: v.name)))
                    out.append(ir.If(guard, ir.Block(tuple(rest))))
                return out, flags
        return out, flags

    def stmt(self, s, ctx) -> tuple:
        brk, cnt = ctx
        if isinstance(s, ir.Break):
            if brk is None:
                raise DiffError(s.loc, "break outside a loop or switch")
            return [ir.Assign("=", brk, TRUE, s.loc)], {brk}
        if isinstance(s, ir.Continue):
            if cnt is None:
                raise DiffError(s.loc, "continue outside a loop")
            return [ir.Assign("=", cnt, TRUE, s.loc)], {cnt}
        if isinstance(s, ir.Return):
            if self.ret_flag is None:
                return [s], set()
            out = []
            if s.value is not None and self.ret_var is not None:
                out.append(ir.Assign("=", self.ret_var, s.value, s.loc))
            out.append(ir.Assign("=", self.ret_flag, TRUE, s.loc))
            return out, {self.ret_flag}
        if isinstance(s, ir.Block):
            stmts, fl = self.seq(list(s.stmts), ctx)
            return [ir.Block(tuple(stmts), s.loc)], fl
        if isinstance(s, ir.If):
            t, f1 = self.seq(list(s.then.stmts), ctx)
            o, f2 = self.seq(list(s.other.stmts), ctx)
            return [ir.If(s.cond, ir.Block(tuple(t), s.then.loc),
                          ir.Block(tuple(o), s.other.loc), s.loc)], f1 | f2
        if isinstance(s, ir.Loop):
            return self.loop(s)
        if isinstance(s, ir.Switch):
            return self.switch(s, ctx)
        if isinstance(s, ir.Case):
            raise DiffError(s.loc, "case label outside a switch")
        return [s], set()

    def loop(self, s: ir.Loop) -> tuple:
        body = list(s.body.stmts)
        brk = self.var(names.BREAK_FLAG, ir.BOOL) if _direct(body, ir.Break) else None
        cnt = self.var(names.CONTINUE_FLAG, ir.BOOL) if _direct(body, ir.Continue) else None
        stmts, fl = self.seq(body, (brk, cnt))
        escape = {f for f in fl if f is self.ret_flag}
        init = list(s.init)
        if cnt is not None:
            stmts = [ir.Decl(cnt, FALSE)] + stmts
        if brk is not None:
            init.append(ir.Decl(brk, FALSE))
        cond = s.cond
        if s.do_while:
            first = self.var(names.FIRST_FLAG, ir.BOOL)
            init.append(ir.Decl(first, TRUE))
            cond = _or([first, cond]) if cond is not None else None
            stmts = [ir.Assign("=", first, FALSE)] + stmts
        stops = [f for f in (brk, self.ret_flag if escape else None) if f is not None]
        inc = list(s.inc)
        if stops and inc:
            stmts.append(ir.If(_not(_or(stops)), ir.Block(tuple(inc))))
            inc = []
        guards = [_not(f) for f in stops]
        full = _and(guards + ([cond] if cond is not None else [])) if (guards or cond) else None
        return [ir.Loop(tuple(init), full, tuple(inc), ir.Block(tuple(stmts), s.body.loc),
                        s.loc, s.pragma if not stops or s.pragma.startswith("torchclad") else "",
                        False)], escape

    def switch(self, s: ir.Switch, ctx) -> tuple:
        _, cnt = ctx
        items = list(s.body.stmts)
        sw = self.var(names.SWITCH_VALUE, s.cond.type.value() if not s.cond.type.real else ir.LONG)
        fall = self.var(names.FALL_FLAG, ir.BOOL)
        brk = self.var(names.BREAK_FLAG, ir.BOOL) if _direct(items, ir.Break) else None
        segments: list = []          # (values, is_default, stmts)
        for it in items:
            if isinstance(it, ir.Case):
                if segments and not segments[-1][2]:
                    vals, dflt, _ = segments[-1]
                    segments[-1] = (vals + ([it.value] if it.value is not None else []),
                                    dflt or it.value is None, [])
                else:
                    segments.append(([it.value] if it.value is not None else [],
                                     it.value is None, []))
            elif segments:
                segments[-1][2].append(it)
        all_vals = [v for vals, _, _ in segments for v in vals]
        out = [ir.Decl(sw, s.cond), ir.Decl(fall, FALSE)]
        if brk is not None:
            out.append(ir.Decl(brk, FALSE))
        seen_flags: set = set()
        escape: set = set()
        for vals, dflt, stmts in segments:
            tests = [ir.Binary("==", sw, v, ir.BOOL) for v in vals]
            if dflt:
                tests.append(_and([ir.Binary("!=", sw, v, ir.BOOL) for v in all_vals])
                             if all_vals else TRUE)
            match = _or([fall] + tests)
            body, fl = self.seq(stmts, (brk, cnt))
            stops = sorted(seen_flags | ({brk} if brk is not None else set()),
                           key=lambda v: v.name)
            cond = _and([_not(_or(stops)), match]) if stops else match
            out.append(ir.If(cond, ir.Block(tuple([ir.Assign("=", fall, TRUE)] + body))))
            seen_flags |= {f for f in fl if f is not brk}
            escape |= {f for f in fl if f is not brk}
        return [ir.Block(tuple(out), s.loc)], escape


def _has_user_call(e) -> bool:
    return any(isinstance(x, ir.Call) and x.user for x in ir.walk_expr(e))


def normalize(fn: ir.Function) -> ir.Function:
    return Normalizer(fn).run()
