"""Statement-level forward mode: each statement is preceded by the statement that computes the
tangent of what it writes (reading the values as they are before it runs), in one sweep, with
no tape of its own:

    v = e:       _d_v = de;  v = e              (de None: _d_v = 0; v not active: v = e only)
    v += e:      _d_v += de; v += e
    T v = f(x):  ValueAndPushforward<T, T> _t0 = f_pushforward(x, _d_x);
                 T _d_v = _t0.pushforward;  T v = _t0.value;
    if / loop:   the same control flow around the transformed statements; a loop keeps its
                 OpenMP pragma, the tangents of its clause variables added
    return e:    return {e, de} (f_pushforward), return de (f_darg0)
    par_combine(d, parts, k, n):  par_combine(_d_d, _d_parts, k, n); par_combine(...)
                 (a parallel reverse's partial sums, in generated code: linear)

Generated code (a pullback differentiated again) also records on the tape: a floating value
pushed is followed by its tangent, so a pop takes the tangent first (`_d_x = pop; x = pop`);
a pointer read back from the tape gets its tangent from its offset.
"""
from __future__ import annotations

from dataclasses import dataclass
from .. import ir, names
from ..errors import DiffError
from ..reverse.transform import TAPE, template_args
from ..rules import math as rules
from .pragma import tangent_pragma
from .tangent import ZERO, TangentRules, real


@dataclass(frozen=True)
class CalleeInfo:
    """What a call site calls for a differentiated callee."""
    name: str                 # the pushforward, qualified (custom derivatives)
    slots: tuple              # callee parameter indices that take a tangent argument, in order
    void: bool                # the callee returns nothing


def value_and_pushforward(t: ir.Type) -> ir.Type:
    s = t.value().spell()
    return ir.Type(f"{names.VALUE_AND_PUSHFORWARD}<{s}, {s}>")


def _field(tmp: ir.Var, field: str, t: ir.Type) -> ir.Raw:
    return ir.Raw("{0}." + field, t, (tmp,))


def _is_pop(e) -> bool:
    return isinstance(e, ir.TapePop)


def _has_pop(e) -> bool:
    return e is not None and any(isinstance(x, ir.TapePop) for x in ir.walk_expr(e))


class Forward:
    """The forward-mode body of one function. `callees` answers two questions about a call:
    `differentiated(call)` (a user function, a generated function or a custom derivative,
    rather than math or a runtime helper) and `info(call, mask, loc)` -> CalleeInfo, what the
    call site calls when the arguments at indices `mask` carry tangents."""

    def __init__(self, fn: ir.Function, tangents, tnames: dict, callees,
                 mode: str, taken: set):
        self.fn = fn
        self.t = tangents
        self.tnames = tnames
        self.rules = TangentRules(tangents, tnames, fn)
        self.callees = callees
        self.mode = mode                # "pushforward" | "darg" | "generated"
        self.taken = set(taken)
        self.counts: dict = {}
        by_name = {v.name: v for v in tangents.aliases.vars.values()}
        self.tangent_of_name = lambda n: (tnames.get(by_name[n].uid)
                                          if n in by_name else None)

    def fresh(self, prefix: str, t: ir.Type) -> ir.Var:
        while True:
            k = self.counts.get(prefix, 0)
            self.counts[prefix] = k + 1
            if f"{prefix}{k}" not in self.taken:
                self.taken.add(f"{prefix}{k}")
                return ir.Var(f"{prefix}{k}", t, 0)

    # ------------------------------------------------------------------ helpers
    def active_target(self, target) -> bool:
        if not target.type.real or target.type.is_memory:
            return False
        if isinstance(target, ir.Var):
            return self.t.var(target)
        return self.t.memory(target)

    def dtarget(self, target) -> ir.Expr:
        return self.rules.tlvalue(target)

    def tangent(self, e, result=None):
        return self.rules.tangent(e, result)

    def zero(self, t: ir.Type) -> ir.Expr:
        return ir.Cast(ZERO, real(t), "fn")

    def _result_first(self, value, target) -> bool:
        """`v = f(u)` with f's derivative written with its result and v not read by u: the
        tangent comes after the value and reads v instead of computing f(u) again."""
        if not (isinstance(value, ir.Call) and not value.user and isinstance(target, ir.Var)):
            return False
        rule = rules.lookup(ir.call_name(value.fn))
        return rule is not None and rule.uses_result and target.uid not in ir.vars_in(value)

    # ------------------------------------------------------------------ statements
    def block(self, b: ir.Block) -> ir.Block:
        out: list = []
        for s in b.stmts:
            self.rules.loc = getattr(s, "loc", self.fn.loc)
            out.extend(self.stmt(s))
        return ir.Block(tuple(out), b.loc)

    def stmt(self, s) -> list:
        visit = getattr(self, "stmt_" + type(s).__name__, None)
        if visit is None:
            raise DiffError(getattr(s, "loc", None),
                            f"internal: forward mode met {type(s).__name__}")
        return visit(s)

    def stmt_Block(self, s):
        return [self.block(s)]

    def stmt_If(self, s):
        return [ir.If(self.guard(s), self.block(s.then), self.block(s.other), s.loc)]

    def guard(self, s: ir.If) -> ir.Expr:
        """`if (a != 0) { ... }` in generated code only skips adding a zero (a promoted
        accumulator's flush, a zero adjoint's propagation): with a tangent, it must also run
        when a is zero but its tangent is not."""
        c = s.cond
        zero = c.rhs.operand if isinstance(c, ir.Binary) and isinstance(c.rhs, ir.Cast) \
            else getattr(c, "rhs", None)
        if self.mode != "generated" or s.other.stmts or not (
                isinstance(c, ir.Binary) and c.op == "!=" and c.lhs.type.is_real_scalar and
                isinstance(zero, ir.Const) and zero.text == "0"):
            return c
        d = self.tangent(c.lhs)
        if d is None:
            return c
        return ir.Binary("||", c, ir.Binary("!=", d, c.rhs, ir.BOOL), ir.BOOL)

    def stmt_Loop(self, s):
        init = [x for st in s.init for x in self.stmt(st)]
        inc = [x for st in s.inc for x in self.stmt(st)]
        pragma = tangent_pragma(s.pragma, self.tangent_of_name) if s.pragma else ""
        return [ir.Loop(tuple(init), s.cond, tuple(inc), self.block(s.body), s.loc, pragma,
                        s.do_while)]

    def stmt_Comment(self, s):
        return [s]

    stmt_Break = stmt_Continue = stmt_Comment

    def stmt_Return(self, s):
        if s.value is None or self.fn.ret.base == "void":
            return [s]
        if self.fn.ret.ptr:
            return [self.return_pointer(s)]
        d = self.tangent(s.value) if self.fn.ret.real else None    # an integer: no tangent
        d = d if d is not None else self.zero(self.fn.ret)
        if self.mode == "darg":
            return [ir.Return(d, s.loc)]
        vp = value_and_pushforward(self.fn.ret)
        return [ir.Return(ir.Call(vp.base, (s.value, d), vp), s.loc)]

    def return_pointer(self, s) -> ir.Return:
        """`return p` of a function returning a pointer or a reference (whose value the IR
        holds as the address): {p, the tangent pointer at the same offset} (Clad's
        ValueAndPushforward<T*, T*>); the tangent is null where p's memory has none."""
        t = self.fn.ret.value()
        v = s.value
        if isinstance(v, ir.Unary) and v.op == "&" and v.type.ref:      # binds the reference
            v = ir.Unary("&", v.operand, t)
        elif not v.type.ptr:
            v = ir.Unary("&", v, t)
        root = ir.root_var(v)
        null = ir.Cast(ir.Const("nullptr", real(t).pointer_to()), real(t).pointer_to(), "c")
        d = self.rules.dptr(v) if not ir.is_null(v) and root is not None and \
            self.t.memory(v) else null
        vp = value_and_pushforward(t)
        return ir.Return(ir.Call(vp.base, (v, d), vp), s.loc)

    def stmt_Decl(self, s):
        v = s.var
        call = self.diff_call(s.init)
        if call is not None:
            return self.call_stmt(s, call, v)
        if v.type.is_pointer:
            if not self.t.var(v):
                return [s]
            if _has_pop(s.init):
                return [s, ir.Decl(self.rules.tvar(v), self.from_offset(v), (), s.loc)]
            init = self.rules.dptr(s.init) if s.init is not None else None
            return [ir.Decl(self.rules.tvar(v), init, (), s.loc), s]
        if v.type.is_object or (v.type.is_array and v.type.record):
            return self.struct_decl(s)
        if v.type.is_array:
            if not v.type.real or not self.t.var(v):
                return [s]
            items = tuple(self.tangent(e) or ZERO for e in s.init_list) if s.init_list and \
                not (len(s.init_list) == 1 and isinstance(s.init_list[0], ir.Const)
                     and s.init_list[0].text == "{}") else (ir.Const("{}", v.type),)
            if all(x is ZERO for x in items):
                items = (ir.Const("{}", v.type),)
            return [ir.Decl(self.rules.tvar(v), None, items, s.loc), s]
        if not v.type.real:
            return [s]
        if not self.t.var(v):
            return ([ir.ExprStmt(ir.TapePop(real(v.type)), s.loc)] if _is_pop(s.init) else []) \
                + [s]
        tv = ir.Var(self.tnames[v.uid], ir.Type(v.type.base, 0, v.type.const, (), True), 0)
        if s.init is None:
            return [ir.Decl(tv, ZERO, (), s.loc), s]
        if _is_pop(s.init):
            return [ir.Decl(tv, ir.TapePop(real(v.type)), (), s.loc), s]
        if self._result_first(s.init, v):
            d = self.tangent(s.init, v)
            return [s, ir.Decl(tv, d if d is not None else ZERO, (), s.loc)]
        d = self.tangent(s.init)
        return [ir.Decl(tv, d if d is not None else ZERO, (), s.loc), s]

    def struct_decl(self, s) -> list:
        """`S v{...};` (or an array of S): its tangent struct `S _d_v{};` with every floating
        field zeroed (`{}` would give a field its default member initializer)."""
        v = s.var
        if not v.type.real or not self.t.var(v):
            return [s]
        tv = self.rules.tvar(v)
        k = self.fresh(names.RESET_INDEX, ir.LONG) if v.type.dims else None
        return [ir.Decl(tv, None, (ir.Const("{}", tv.type),), s.loc),
                *ir.zeroed_fields(tv, k, s.loc), s]

    def from_offset(self, p: ir.Var) -> ir.Expr:
        """The tangent of pointer p from its offset into its root: `_d_r + (p - r)`."""
        r = self.t.root(p)
        start = r if r.type.is_memory else ir.Unary("&", r, r.type.pointer_to())
        t = ir.Type(p.type.base, p.type.ptr, p.type.const, (), True)
        return ir.Binary("+", self.rules.dptr(start),
                         ir.Binary("-", p, start, ir.Type("ptrdiff_t")), t)

    def stmt_Assign(self, s):
        t = s.target
        call = self.diff_call(s.value)
        if call is not None:
            return self.call_stmt(s, call, t)
        if isinstance(t, ir.Var) and t.type.is_pointer:
            if not self.t.var(t):
                return [s]
            if _has_pop(s.value):
                return [s, ir.Assign("=", self.rules.tvar(t), self.from_offset(t), s.loc)]
            value = self.rules.dptr(s.value) if s.value.type.is_pointer else s.value
            return [ir.Assign(s.op, self.rules.tvar(t), value, s.loc), s]
        if not t.type.real or t.type.is_memory:
            return [s]
        if not self.active_target(t):
            return ([ir.ExprStmt(ir.TapePop(real(t.type)), s.loc)] if _is_pop(s.value) else []) \
                + [s]
        dt = self.dtarget(t)
        if _is_pop(s.value):
            return [ir.Assign("=", dt, ir.TapePop(real(t.type)), s.loc), s]
        if s.op == "=":
            if self._result_first(s.value, t):
                d = self.tangent(s.value, t)
                return [s, ir.Assign("=", dt, d if d is not None else ZERO, s.loc)]
            d = self.tangent(s.value)
            return [ir.Assign("=", dt, d if d is not None else ZERO, s.loc), s]
        if s.op in ("+=", "-="):
            d = self.tangent(s.value)
            return ([ir.Assign(s.op, dt, d, s.loc)] if d is not None else []) + [s]
        if s.op in ("*=", "/="):
            d = self.tangent(ir.Binary(s.op[0], t, s.value, t.type))
            return [ir.Assign("=", dt, d if d is not None else ZERO, s.loc), s]
        raise DiffError(s.loc, f"operator {s.op} on a floating value is not supported")

    def stmt_ExprStmt(self, s):
        call = self.diff_call(s.expr)
        if call is not None:
            return self.call_stmt(s, call, None)
        e = s.expr
        if isinstance(e, ir.Call) and ir.call_name(e.fn) == names.PAR_COMBINE and \
                self.t.memory(e.args[0]):
            # par_combine(d, parts, k, n): d += sum of the k partial sums (linear): the same
            # on the tangents
            d, parts = (self.rules.dptr(a) for a in e.args[:2])
            return [ir.ExprStmt(ir.Call(e.fn, (d, parts) + e.args[2:], e.type, e.user), s.loc), s]
        if _is_pop(s.expr) and s.expr.type.real and not s.expr.type.is_memory:
            return [ir.ExprStmt(ir.TapePop(real(s.expr.type)), s.loc), s]
        return [s]

    # ------------------------------------------------------------------ the tape
    def stmt_TapePush(self, s):
        v = s.value
        if not v.type.real or v.type.is_memory:
            return [s]
        d = self.tangent(v)
        if d is None:
            d = self.zero(v.type)
        elif not isinstance(d, ir.Var):
            d = ir.Cast(d, real(v.type), "fn")
        return [s, ir.TapePush(d, s.loc)]

    def stmt_TapeArray(self, s):
        if not s.data.type.real:
            return [s]
        if self.t.memory(s.data):
            other = ir.TapeArray(self.rules.dptr(s.data), s.count, s.pop, s.loc)
        else:
            helper = names.DROP_ARRAY if s.pop else names.PUSH_ZERO_ARRAY
            other = ir.ExprStmt(ir.Call(f"{helper}<{s.data.type.base}>", (TAPE, s.count),
                                        ir.VOID), s.loc)
        return [other, s] if s.pop else [s, other]

    def stmt_VectorDecl(self, s):
        if not s.var.type.real or not self.t.var(s.var):
            return [s]
        return [s, ir.VectorDecl(self.rules.tvar(s.var), s.count, s.loc)]

    # ------------------------------------------------------------------ calls
    def diff_call(self, e) -> "ir.Call | None":
        """e when it is a call the engine differentiates as a whole (a user function, a
        generated function, a custom derivative), else None."""
        if isinstance(e, ir.Call) and self.callees.differentiated(e):
            return e
        return None

    def call_stmt(self, s, call: ir.Call, target) -> list:
        """`[T v =] f(args)` -> the callee's pushforward, its value and tangent split."""
        loc = getattr(s, "loc", None)
        mask = tuple(i for i, a in enumerate(call.args) if self.t.arg(a))
        if isinstance(s, ir.Decl):
            active = target.type.real and not target.type.is_memory and self.t.var(target)
        else:
            active = target is not None and self.active_target(target)
        if not mask:
            self.callees.no_tangents(call, loc)
            if active:
                zero = ir.Decl(self.rules.tvar(target), ZERO, (), loc) if isinstance(s, ir.Decl) \
                    else ir.Assign("=", self.dtarget(target), ZERO, loc)
                return [zero, s]
            return [s]
        info = self.callees.info(call, mask, loc)
        targs = []
        for i in info.slots:
            a = call.args[i]
            if i in mask:
                targs.append(self.rules.dptr(a) if a.type.is_memory else self.tangent(a))
            elif a.type.is_memory:
                base = a.type.base if a.type.real else next(
                    (x.type.base for x in call.args if x.type.real and x.type.is_memory),
                    "double")
                nt = ir.Type(base, max(a.type.ptr, 1), a.type.const, (), True)
                targs.append(ir.Cast(ir.Const("nullptr", nt), nt, "c"))
            else:
                targs.append(self.zero(a.type if a.type.real else ir.DOUBLE))
        pf = ir.Call(info.name + template_args(call.fn), call.args + tuple(targs), ir.VOID,
                     False)
        if info.void:
            return [ir.ExprStmt(pf, loc)]
        vt = call.type.value()
        vp = value_and_pushforward(vt)
        tmp = self.fresh(names.SAVED_PREFIX, vp)
        out = [ir.Decl(tmp, ir.Call(pf.fn, pf.args, vp, False), (), loc)]
        value = _field(tmp, names.VALUE_FIELD, vt)
        # (an integer result has no tangent: its pushforward field is zero)
        dvalue = _field(tmp, names.PUSHFORWARD_FIELD, real(vt)) if vt.real else ZERO
        if vt.ptr:          # a pointer (or reference) result: its tangent pointer
            dvalue = _field(tmp, names.PUSHFORWARD_FIELD,
                            ir.Type(vt.base, vt.ptr, vt.const, (), True))
            active = target is not None and isinstance(target, ir.Var) and self.t.var(target)
        if isinstance(s, ir.Decl):
            if active:
                out.append(ir.Decl(self.rules.tvar(target), dvalue, (), loc))
            out.append(ir.Decl(target, value, (), loc))
        elif isinstance(s, ir.Assign):
            if active:
                out.append(ir.Assign("=", self.rules.tvar(target) if vt.ptr else
                                     self.dtarget(target), dvalue, loc))
            out.append(ir.Assign(s.op, target, value, loc))
        return out
