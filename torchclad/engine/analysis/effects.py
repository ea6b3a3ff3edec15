"""What a function does to memory: which pointer parameters it reads and writes.

Asked by the activity analysis (a call's effects on its arguments), the reverse transform (what
a callee reads, so it is recorded) and the driver (a function's output arrays).
"""
from __future__ import annotations

from .. import ir


def pointer_roots(fn: ir.Function) -> dict:
    """pointer local uid -> uid of the variable it points into (through the pointer locals
    it is set from), in one pass over fn in program order."""
    roots = {}
    for s in ir.walk_stmts(fn.body):
        if isinstance(s, ir.Decl) and s.var.type.is_pointer and s.init is not None:
            r = ir.root_var(s.init)
            if r is not None:
                roots[s.var.uid] = roots.get(r.uid, r.uid)
        if isinstance(s, ir.Assign) and isinstance(s.target, ir.Var) and \
                s.target.type.is_pointer:
            r = ir.root_var(s.value)
            if r is not None:
                roots[s.target.uid] = roots.get(r.uid, r.uid)
    return roots


def memory_params(fn: ir.Function) -> tuple:
    """(read, written): indices of pointer params whose memory the function reads / writes
    (directly, through pointer locals, or by passing them on to a callee)."""
    idx = {p.uid: i for i, p in enumerate(fn.params) if p.type.is_pointer}
    roots = pointer_roots(fn)

    def param_of(e):
        r = ir.root_var(e)
        return None if r is None else idx.get(roots.get(r.uid, r.uid))

    read, written = set(), set()
    for s in ir.walk_stmts(fn.body):
        exprs = list(ir.stmt_exprs(s))
        if isinstance(s, ir.Assign) and not isinstance(s.target, ir.Var):
            i = param_of(s.target)
            if i is not None:
                written.add(i)
                if s.op != "=":
                    read.add(i)
            exprs = [s.value] + list(ir.children(s.target))
        for e in exprs:
            for x in ir.walk_expr(e):
                if isinstance(x, (ir.Index, ir.Member)) or \
                        (isinstance(x, ir.Unary) and x.op == "*"):
                    i = param_of(x.base if isinstance(x, (ir.Index, ir.Member)) else x.operand)
                    if i is not None:
                        read.add(i)
                if isinstance(x, ir.Call) and x.user:
                    for a in x.args:
                        i = param_of(a) if a.type.is_pointer else None
                        if i is not None:
                            read.add(i)
                            if not a.type.const:
                                written.add(i)
    return read, written


def written_params(fn: ir.Function) -> set:
    """Indices of pointer params a function writes through (directly or via its callees is
    not tracked: a callee's writes count at its own call sites)."""
    roots = {}
    idx = {p.uid: i for i, p in enumerate(fn.params)}
    for s in ir.walk_stmts(fn.body):
        if isinstance(s, ir.Decl) and s.var.type.is_pointer and s.init is not None:
            r = ir.root_var(s.init)
            if r is not None:
                roots[s.var.uid] = roots.get(r.uid, r.uid)
    out = set()
    for s in ir.walk_stmts(fn.body):
        if isinstance(s, ir.Assign) and not isinstance(s.target, ir.Var):
            r = ir.root_var(s.target)
            if r is not None:
                u = roots.get(r.uid, r.uid)
                if u in idx:
                    out.add(idx[u])
        if isinstance(s, (ir.ExprStmt, ir.Assign, ir.Decl)):
            for e in ir.stmt_exprs(s):
                for x in ir.walk_expr(e):
                    if isinstance(x, ir.Call) and x.user:
                        for a in x.args:
                            if a.type.is_pointer and not a.type.const:
                                r = ir.root_var(a)
                                if r is not None and roots.get(r.uid, r.uid) in idx:
                                    out.add(idx[roots.get(r.uid, r.uid)])
    return {i for i in out if fn.params[i].type.is_pointer}


def call_writes(module: ir.Module, call: ir.Call) -> set:
    """Indices of the arguments of ``call`` whose memory the call may write: the written
    params of a callee defined in ``module``; for any other callee every non-const pointer to
    floating data."""
    callee = module.functions.get(ir.function_key(call.fn))
    if callee is None:
        return {i for i, a in enumerate(call.args)
                if a.type.is_pointer and not a.type.const and a.type.real}
    return written_params(callee)


def global_effects(module: ir.Module, fn: ir.Function, _seen: frozenset = frozenset()) -> tuple:
    """(read, written): uids of the non-const globals of the module that fn reads / writes,
    itself or through the functions it calls (transitively)."""
    writable = {g.var.uid for g in module.globals.values() if not g.var.type.const}
    read, written = set(), set()
    for s in ir.walk_stmts(fn.body):
        exprs = list(ir.stmt_exprs(s))
        if isinstance(s, ir.Assign):
            r = ir.root_var(s.target)
            if r is not None and r.uid in writable:
                written.add(r.uid)
                if s.op != "=" or not isinstance(s.target, ir.Var):
                    read.add(r.uid)
            exprs = [s.value] + list(ir.children(s.target))
        for e in exprs:
            for x in ir.walk_expr(e):
                if isinstance(x, ir.Var) and x.uid in writable:
                    read.add(x.uid)
                if isinstance(x, ir.Call) and x.user:
                    callee = module.functions.get(ir.function_key(x.fn))
                    if callee is not None and callee.name not in _seen | {fn.name}:
                        r, w = global_effects(module, callee, _seen | {fn.name})
                        read |= r
                        written |= w
                    for i in call_writes(module, x):
                        g = ir.root_var(x.args[i]) if i < len(x.args) else None
                        if g is not None and g.uid in writable:
                            written.add(g.uid)
    return frozenset(read), frozenset(written)


def returned_param(module: ir.Module, fn: "ir.Function | None") -> "int | None":
    """The index of the pointer (or reference) parameter whose memory the pointer or
    reference fn returns points into, the same for every return (a null return aside);
    None when fn returns a value, or when there is no such parameter."""
    if fn is None or not fn.ret.ptr:
        return None
    idx = {p.uid: i for i, p in enumerate(fn.params)}
    roots = pointer_roots(fn)
    found = set()
    for s in ir.walk_stmts(fn.body):
        if isinstance(s, ir.Return) and s.value is not None and not ir.is_null(s.value):
            r = ir.root_var(s.value)
            u = roots.get(r.uid, r.uid) if r is not None else None
            if u not in idx or not fn.params[idx[u]].type.ptr:
                return None
            found.add(idx[u])
    return found.pop() if len(found) == 1 else None


def call_root(module: ir.Module, e) -> "ir.Expr | None":
    """For a call of a function of the module returning a pointer into a parameter's memory:
    the argument it points into."""
    if not (isinstance(e, ir.Call) and e.user):
        return None
    k = returned_param(module, module.functions.get(ir.function_key(e.fn)))
    return e.args[k] if k is not None and k < len(e.args) else None
