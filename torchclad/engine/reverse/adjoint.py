"""Expression-level reverse rules: where an adjoint lives and how an adjoint flows back
through an expression. Each visit_<Node> carries its math in its first comment line.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import ir, names
from ..errors import DiffError
from ..rules import math as rules

ZERO = ir.Const("0", ir.INT)
ONE = ir.Const("1", ir.INT)


# ------------------------------------------------------------------ smart constructors
def neg(e):
    if isinstance(e, ir.Unary) and e.op == "-":
        return e.operand
    return ir.Unary("-", e, e.type)


def mul(a, b):
    if isinstance(a, ir.Const) and a.text in ("1", "1.0"):
        return b
    if isinstance(b, ir.Const) and b.text in ("1", "1.0"):
        return a
    t = a.type if a.type.real else b.type
    return ir.Binary("*", a, b, t)


def div(a, b):
    return ir.Binary("/", a, b, a.type if a.type.real else b.type)


def _index(ptr, i, t):
    """ptr[i], folding (a + off)[i] into a[off + i] and (&v)[0] into v so adjoint accesses
    read plainly."""
    if isinstance(ptr, ir.Unary) and ptr.op == "&" and isinstance(i, ir.Const) and \
            i.text == "0" and (not ptr.operand.type.is_memory or ptr.operand.type.is_object):
        return ptr.operand
    if isinstance(ptr, ir.Binary) and ptr.op == "+" and ptr.lhs.type.is_pointer and \
            not ptr.rhs.type.is_pointer:
        off = ptr.rhs
        if not (isinstance(i, ir.Const) and i.text == "0"):
            off = ir.Binary("+", off, i, off.type)
        return ir.Index(ptr.lhs, off, t)
    return ir.Index(ptr, i, t)


def adjoint_type(t: ir.Type) -> ir.Type:
    """The type of the adjoint of a value of type t: its floating type, or the same struct."""
    if t.record:
        return ir.Type(t.base, 0, False, (), True, record=True, fields=t.fields)
    return ir.Type(t.base, 0, False, (), True)


def fixed_addresses(fn: ir.Function) -> dict:
    """uid -> the field of a struct variable (`s.b`, `s.a.x`) that a pointer or reference
    local of fn points at for all its life: declared `&s.b` and never assigned."""
    assigned = {s.target.uid for s in ir.walk_stmts(fn.body)
                if isinstance(s, ir.Assign) and isinstance(s.target, ir.Var)}
    out = {}
    for s in ir.walk_stmts(fn.body):
        if isinstance(s, ir.Decl) and s.var.type.ptr and s.var.uid not in assigned and \
                isinstance(s.init, ir.Unary) and s.init.op == "&":
            x = s.init.operand
            while isinstance(x, ir.Member):
                x = x.base
            if isinstance(x, ir.Var) and isinstance(s.init.operand, ir.Member):
                out[s.var.uid] = s.init.operand
    return out


@dataclass
class Names:
    """Per-function counters for generated names (restart for every generated function)."""
    counts: dict

    def fresh(self, prefix: str, typ: ir.Type) -> ir.Var:
        n = self.counts.get(prefix, 0)
        self.counts[prefix] = n + 1
        return ir.Var(f"{prefix}{n}", typ, 0)


class AdjointRules:
    def __init__(self, fn: ir.Function, activity, adj_names: dict, names: Names, customs,
                 options):
        self.fn = fn
        self.act = activity
        self.al = activity.aliases
        self.adj_names = adj_names      # uid -> adjoint name
        self.names = names
        self.params = {p.uid for p in fn.params}
        self.loc = fn.loc
        self.options = options
        self.local_param_adj: dict = {}
        self.fixed = fixed_addresses(fn)

    # ------------------------------------------------------------------ addressing
    def adj_var(self, v: ir.Var) -> ir.Expr:
        """The adjoint of a scalar variable or struct object: `_d_v`, or `*_d_x` for a
        parameter."""
        t = adjoint_type(v.type)
        name = self.adj_names[v.uid]
        if v.uid in self.local_param_adj:
            return self.local_param_adj[v.uid][0]
        if v.uid in self.params:
            return ir.Unary("*", ir.Var(name, t.pointer_to(), 0), t)
        return ir.Var(name, t, 0)

    def adj_root(self, r: ir.Var) -> tuple:
        """(adjoint base pointer, primal base pointer) of a memory root."""
        if r.type.is_object:          # a struct object: its adjoint object's address
            a = self.adj_var(r)
            ap = a.operand if isinstance(a, ir.Unary) else ir.Unary("&", a, a.type.pointer_to())
            return ap, ir.Unary("&", r, r.type.pointer_to())
        if r.type.is_memory:
            t = ir.Type(r.type.base, 1, False, (), True)
            return ir.Var(self.adj_names[r.uid], t, 0), r
        if r.uid in self.params and r.uid not in self.local_param_adj:   # a scalar parameter
            a = self.adj_var(r)
            return a.operand, ir.Unary("&", r, r.type.pointer_to())
        a = self.adj_var(r)
        return ir.Unary("&", a, a.type.pointer_to()), ir.Unary("&", r, r.type.pointer_to())

    def adj_ptr(self, e) -> ir.Expr:
        """The adjoint pointer matching a primal pointer expression."""
        t = ir.Type(e.type.base, 1, False, (), True)
        if isinstance(e, ir.Var):
            r = self.al.roots.get(e.uid, e)
            if e.uid in self.fixed:      # `T* p = &s.f` never moved: at the adjoint's s.f
                return ir.Unary("&", self.adj_lvalue(self.fixed[e.uid]), t)
            if r.type.is_object and r.uid != e.uid and e.type.base != r.type.base:
                return self.field_adj_ptr(e, r)
            if r.uid == e.uid or not r.type.is_memory or r.type.is_object:
                return self.adj_root(r)[0]           # a pointer to one object: at it
            adj, base = self.adj_root(r)
            return ir.Binary("+", adj, ir.Binary("-", e, base, ir.Type("ptrdiff_t")), t)
        if isinstance(e, ir.Binary) and e.op in ("+", "-"):
            if e.lhs.type.is_memory:
                return ir.Binary(e.op, self.adj_ptr(e.lhs), e.rhs, t)
            return ir.Binary("+", e.lhs, self.adj_ptr(e.rhs), t)
        if isinstance(e, ir.Unary) and e.op == "&":
            x = e.operand
            if isinstance(x, ir.Index):
                base = self.adj_ptr(x.base)
                if isinstance(base, ir.Unary) and base.op == "&" and \
                        isinstance(x.index, ir.Const) and x.index.text == "0":
                    return base                      # &(&v)[0] is &v
                return ir.Unary("&", ir.Index(base, x.index, x.type), t)
            if isinstance(x, ir.Var):
                a = self.adj_var(x)
                return a.operand if isinstance(a, ir.Unary) else ir.Unary("&", a, t)
            if isinstance(x, ir.Member):
                return ir.Unary("&", self.adj_lvalue(x), t)
        if isinstance(e, ir.Cast):
            return self.adj_ptr(e.operand)
        if ir.is_null(e):
            return ir.Cast(ir.Const("nullptr", t), t, "c")
        if isinstance(e, ir.Cond):
            base = next((x.type.base for x in (e.then, e.other) if not ir.is_null(x)), "double")
            tt = ir.Type(base, 1, False, (), True)
            side = lambda x: ir.Cast(ir.Const("nullptr", tt), tt, "c") if ir.is_null(x) \
                else self.adj_ptr(x)
            return ir.Cond(e.cond, side(e.then), side(e.other), tt)
        raise DiffError(self.loc, f"cannot form the adjoint of pointer expression "
                                  f"({type(e).__name__}); index a parameter or local array")

    def field_adj_ptr(self, e: ir.Var, r: ir.Var) -> ir.Expr:
        """The adjoint of pointer e into struct object r (at one of its fields): the same
        byte offset into r's adjoint object, which has r's type and layout."""
        char = ir.Type("char", 1)
        adj, base = self.adj_root(r)
        off = ir.Binary("-", ir.Cast(e, ir.Type("char", 1, True), "c"),
                        ir.Cast(base, ir.Type("char", 1, True), "c"), ir.Type("ptrdiff_t"))
        t = ir.Type(e.type.base, 1, False, (), e.type.real, record=e.type.record,
                    fields=e.type.fields)
        return ir.Cast(ir.Binary("+", ir.Cast(adj, char, "c"), off, char), t, "c")

    def adj_lvalue(self, target) -> ir.Expr:
        if isinstance(target, ir.Var):
            return self.adj_var(target)
        if isinstance(target, ir.Index):
            return _index(self.adj_ptr(target.base), target.index, target.type)
        if isinstance(target, ir.Unary) and target.op == "*":
            return _index(self.adj_ptr(target.operand), ZERO, target.type)
        if isinstance(target, ir.Member):      # the same field of the adjoint object
            return ir.Member(self.adj_lvalue(target.base), target.name, target.type)
        raise DiffError(self.loc, "unsupported assignment target")

    def target_active(self, target) -> bool:
        if not target.type.real or target.type.is_pointer:
            return False
        if isinstance(target, ir.Var):
            return self.act.var_active(target)
        r = self.al.root_of(target)
        return r is not None and self.act.is_active(self.al.mem_key(r))

    # ------------------------------------------------------------------ backprop
    def backprop(self, e, d, out: list, result=None) -> None:
        """Append statements that add d * de/dx to the adjoint of every active x in e."""
        if not self.act.expr_active(e):
            return
        visit = getattr(self, "visit_" + type(e).__name__)
        visit(e, d, out, result)

    def visit_Var(self, e, d, out, result):
        # y = v;  dv += dy
        out.append(ir.Assign("+=", self.adj_var(e), d))

    def visit_Index(self, e, d, out, result):
        # y = p[i];  dp[i] += dy
        out.append(ir.Assign("+=", self.adj_lvalue(e), d))

    def visit_Member(self, e, d, out, result):
        # y = s.x;  _d_s.x += dy
        out.append(ir.Assign("+=", self.adj_lvalue(e), d))

    def visit_Unary(self, e, d, out, result):
        if e.op == "*":
            # y = *p;  (*dp) += dy
            out.append(ir.Assign("+=", self.adj_lvalue(e), d))
        elif e.op == "-":
            # y = -x;  dx -= dy
            self.backprop(e.operand, neg(d), out)
        elif e.op == "+":
            self.backprop(e.operand, d, out)

    def visit_Binary(self, e, d, out, result):
        l, r = e.lhs, e.rhs
        la, ra = self.act.expr_active(l), self.act.expr_active(r)
        if e.op == "+":
            # y = l + r;  dl += dy;  dr += dy
            self.backprop(l, d, out)
            self.backprop(r, d, out)
        elif e.op == "-":
            # y = l - r;  dl += dy;  dr -= dy
            self.backprop(l, d, out)
            self.backprop(r, neg(d), out)
        elif e.op == "*":
            if self.repeated_factors(e, d, out):
                return
            # y = l * r;  dl += dy * r;  dr += l * dy
            if la:
                self.backprop(l, mul(d, r), out)
            if ra:
                self.backprop(r, mul(l, d), out)
        elif e.op == "/":
            # y = l / r;  dl += dy / r;  dr += -dy * l / (r * r)
            if la:
                self.backprop(l, div(d, r), out)
            if ra:
                rr = ir.Binary("*", r, r, r.type)
                self.backprop(r, div(mul(neg(d), l), rr), out)
        # comparisons, logic, bit operations, %: no derivative

    def repeated_factors(self, e, d, out) -> bool:
        """y = f1 * ... * fn where an active factor x occurs k > 1 times;
        dx += k * (dy * (the product without one x)), one term per distinct factor.

        The occurrence-by-occurrence rule gives k terms, each the same product associated
        differently (for `c * x * x * x`: (dy*x*x)*c, (c*x)*(dy*x), (c*x*x)*dy), which a
        compiler may not merge without fast-math; GELU's cube paid for them. A product with
        no repeated active factor keeps the binary rule and its code. Factors must be reads
        (no user call, no tape pop), so that each occurrence is the same value."""
        factors = _factors(e)
        if not all(_plain(f) for f in factors):
            return False
        distinct: list = []
        for f in factors:
            if f not in distinct and self.act.expr_active(f):
                distinct.append(f)
        counts = [factors.count(f) for f in distinct]
        if all(k == 1 for k in counts):
            return False
        for f, k in zip(distinct, counts):
            rest = list(factors)
            rest.remove(f)
            prod = rest[0]
            for g in rest[1:]:
                prod = mul(prod, g)
            term = mul(d, prod)
            if k > 1:
                term = mul(ir.Cast(ir.Const(str(k), ir.INT), e.type, "fn"), term)
            self.backprop(f, term, out)
        return True

    def visit_Cond(self, e, d, out, result):
        # y = c ? a : b;  if (c) da += dy; else db += dy
        then, other = [], []
        self.backprop(e.then, d, then)
        self.backprop(e.other, d, other)
        if then or other:
            out.append(ir.If(e.cond, ir.Block(tuple(then)), ir.Block(tuple(other))))

    def visit_Cast(self, e, d, out, result):
        # y = (T)x;  dx += dy for a floating T; an integer T cuts the derivative
        if e.type.real and e.operand.type.real:
            self.backprop(e.operand, d, out)

    def visit_Const(self, e, d, out, result):
        pass

    def visit_Call(self, e, d, out, result):
        # y = f(x0, x1);  dxk += dy * df/dxk  (rule table)
        short = ir.call_name(e.fn).split("::")[-1]
        rule = rules.rule_for(e, self.loc, names.pullback(short))
        if rule.zero:
            return
        y = result if result is not None else e
        for k, (arg, pb) in enumerate(zip(e.args, rule.pullbacks)):
            if pb is None or not self.act.expr_active(arg):
                continue
            typ = arg.type if arg.type.real else e.type
            self.backprop(arg, rules.pullback(rule, k, e.args, y, d, typ), out)

    def visit_Raw(self, e, d, out, result):
        raise DiffError(self.loc, "internal: generated expression in primal code")


def _factors(e) -> list:
    """The factors of a floating product, left to right: ((a * b) * c) * (d * e) gives
    [a, b, c, d, e]. Casts and other operators end a factor."""
    if isinstance(e, ir.Binary) and e.op == "*" and e.type.is_real_scalar:
        return _factors(e.lhs) + _factors(e.rhs)
    return [e]


def _plain(e) -> bool:
    """e reads values only: variables, constants, memory, arithmetic, library math calls."""
    if isinstance(e, (ir.Var, ir.Const)):
        return True
    if isinstance(e, ir.Index):
        return _plain(e.base) and _plain(e.index)
    if isinstance(e, (ir.Member, ir.Unary, ir.Cast)):
        return _plain(e.base if isinstance(e, ir.Member) else e.operand)
    if isinstance(e, ir.Binary):
        return _plain(e.lhs) and _plain(e.rhs)
    if isinstance(e, ir.Call):
        return not e.user and not e.method and all(_plain(a) for a in e.args)
    return False
