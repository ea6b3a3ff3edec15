"""Traversal of the IR: the children of a node, walks, the names and variables an
expression or statement uses, and small questions about expressions (root variable, null)."""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Iterator

from .nodes import (BOOL, INT, LONG, NOLOC, Assign, Expr, Binary, Block, Call, Case, Cast, Cond, Const, Decl,
                    ExprStmt, If, Index, Loop, Member, Raw, Return, Switch, TapeArray, TapePush,
                    Type, Unary, Var, VectorDecl)

# ----------------------------------------------------------------------------- traversal helpers
def children(e) -> tuple:
    if isinstance(e, Index):
        return (e.base, e.index)
    if isinstance(e, Member):
        return (e.base,)
    if isinstance(e, (Unary, Cast)):
        return (e.operand,)
    if isinstance(e, Binary):
        return (e.lhs, e.rhs)
    if isinstance(e, Call):
        return e.args
    if isinstance(e, Cond):
        return (e.cond, e.then, e.other)
    if isinstance(e, Raw):
        return e.reads
    return ()


def walk_expr(e) -> Iterator:
    yield e
    for c in children(e):
        yield from walk_expr(c)


def vars_in(e) -> set:
    """uids of every variable an expression reads (including pointer bases)."""
    return {x.uid for x in walk_expr(e) if isinstance(x, Var)}


_NAME = re.compile(r"[A-Za-z_]\w*")


def names_in(e) -> set:
    """Names of the variables an expression spells (a template's are among its reads)."""
    return {x.name for x in walk_expr(e) if isinstance(x, Var)}


def stmt_names(s) -> set:
    """Names a statement and the statements nested in it spell (declared ones included)."""
    out = set()
    for x in walk_stmts(s):
        if isinstance(x, (Decl, VectorDecl)):
            out.add(x.var.name)
        for e in stmt_exprs(x):
            out |= names_in(e)
    return out


# The condition of a reverse loop, `for (v = hi; v-- > lo; )`: Raw(REVERSED_COND, BOOL, (v, lo)).
REVERSED_COND = "{0}-- > {1}"


def reversed_cond(v: Var, lo) -> Raw:
    return Raw(REVERSED_COND, BOOL, (v, lo), assigns=True)


def is_reversed_cond_of(e, names) -> bool:
    """e is the condition of a reverse loop whose variable is one of `names`."""
    return (isinstance(e, Raw) and e.text == REVERSED_COND and isinstance(e.reads[0], Var)
            and e.reads[0].name in names)


def walk_stmts(s) -> Iterator:
    """Every statement nested in s (s included), in program order; loop init/inc included."""
    yield s
    if isinstance(s, Block):
        for c in s.stmts:
            yield from walk_stmts(c)
    elif isinstance(s, If):
        yield from walk_stmts(s.then)
        yield from walk_stmts(s.other)
    elif isinstance(s, Loop):
        for c in s.init:
            yield from walk_stmts(c)
        yield from walk_stmts(s.body)
        for c in s.inc:
            yield from walk_stmts(c)
    elif isinstance(s, Switch):
        yield from walk_stmts(s.body)


def stmt_exprs(s) -> tuple:
    """Expressions directly held by a statement (not by nested statements)."""
    if isinstance(s, Decl):
        return ((s.init,) if s.init is not None else ()) + tuple(s.init_list)
    if isinstance(s, Assign):
        return (s.target, s.value)
    if isinstance(s, (ExprStmt,)):
        return (s.expr,)
    if isinstance(s, If):
        return (s.cond,)
    if isinstance(s, Loop):
        return (s.cond,) if s.cond is not None else ()
    if isinstance(s, Switch):
        return (s.cond,)
    if isinstance(s, Return):
        return (s.value,) if s.value is not None else ()
    if isinstance(s, Case):
        return (s.value,) if s.value is not None else ()
    if isinstance(s, TapePush):
        return (s.value,)
    if isinstance(s, TapeArray):
        return (s.data, s.count)
    if isinstance(s, VectorDecl):
        return (s.count,)
    return ()


def element_count(t: Type) -> "Expr":
    """The number of elements of a local array type: its dims multiplied."""
    n = None
    for d in t.dims:
        c = Const(d if _NAME.fullmatch(d) or d.isdigit() else f"({d})", LONG)
        n = c if n is None else Binary("*", n, c, LONG)
    return n if n is not None else Const("1", LONG)


def call_name(fn: str) -> str:
    """Lookup name of a spelled callee: '::std::max<double>' -> 'std::max'."""
    fn = re.sub(r"<.*>$", "", fn.replace(" ", ""))
    return fn[2:] if fn.startswith("::") else fn


def function_key(fn: str) -> str:
    """The key of a called function in `Module.functions` / `customs` (unqualified: the
    module keys functions by name): '::n1::n2::sum<double>' -> 'sum'."""
    return call_name(fn).split("::")[-1]


def real_fields(obj) -> list:
    """`obj.x`, `obj.in.y`, ...: the floating fields of a struct object, nested ones too."""
    out = []
    for name, t in obj.type.fields:
        m = Member(obj, name, t)
        if t.is_object:
            out.extend(real_fields(m))
        elif t.real:
            out.append(m)
    return out


def zeroed_fields(a: Var, k: Var, loc=NOLOC) -> list:
    """The statements that zero every floating field of struct object a, or of every element
    of an array a of structs with the counter k (`T a[n] = {};` alone would give each field
    its default member initializer)."""
    zero = Const("0", INT)
    if not a.type.dims:
        return [Assign("=", m, zero, loc) for m in real_fields(a)]
    t = a.type
    flat = a if len(t.dims) == 1 else Cast(a, replace(t, dims=(), ptr=1), "c")
    elem = Index(flat, k, replace(t, dims=()))
    body = Block(tuple(Assign("=", m, zero, loc) for m in real_fields(elem)))
    return [Loop((Decl(k, Const("0", LONG)),), Binary("<", k, element_count(t), BOOL),
                 (Assign("+=", k, Const("1", INT)),), body, loc)]


def rebuild(e, kids):
    """e with its children (as ordered by `children`) replaced."""
    if isinstance(e, Index):
        return replace(e, base=kids[0], index=kids[1])
    if isinstance(e, Member):
        return replace(e, base=kids[0])
    if isinstance(e, (Unary, Cast)):
        return replace(e, operand=kids[0])
    if isinstance(e, Binary):
        return replace(e, lhs=kids[0], rhs=kids[1])
    if isinstance(e, Call):
        return replace(e, args=tuple(kids))
    if isinstance(e, Cond):
        return replace(e, cond=kids[0], then=kids[1], other=kids[2])
    if isinstance(e, Raw):
        return replace(e, reads=tuple(kids))
    return e
