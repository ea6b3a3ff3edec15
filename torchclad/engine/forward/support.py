"""What forward mode refuses, checked before anything is planned or emitted.

Reverse mode differentiates more C++ than forward mode does yet. Rather than emit code that is
wrong or does not compile, a forward request (f_pushforward, f_darg<k>, and
f_pullback_pushforward: jvp, double backward, Hessians) over a function that reaches one of
these constructs is refused at the construct, with a DiffError saying reverse mode takes it:

- structs and classes (a field, an object, a member function call).

Mutual recursion (f calls g calls f) is an error of its own: the generated functions would
call each other before their declarations. A function that calls itself is differentiated:
its pushforward calls itself.
"""
from __future__ import annotations

from .. import ir, names
from ..errors import DiffError

_NOT_YET = ("forward mode (jvp, double backward, Hessian) does not support {} yet; reverse "
            "mode (gradients) does")


def refuse(loc, what: str):
    raise DiffError(loc, _NOT_YET.format(what))


def check(module: ir.Module, fn: ir.Function) -> None:
    """Refuse fn when it, or a function it calls (and forward mode differentiates), uses a
    construct forward mode does not support."""
    _visit(module, fn, [], set())


def _callee(module: ir.Module, call: ir.Call) -> "ir.Function | None":
    key = ir.function_key(call.fn)
    if not call.user or key not in module.functions or names.pushforward(key) in module.customs:
        return None
    return module.functions[key]


def _visit(module: ir.Module, fn: ir.Function, path: list, done: set) -> None:
    if fn.name in done:
        return
    path.append(fn.name)
    for p in fn.params:
        if p.type.record:
            refuse(fn.loc, f"a struct or class parameter ('{p.name}' of '{fn.name}')")
    for s in ir.walk_stmts(fn.body):
        loc = getattr(s, "loc", None) or fn.loc
        _statement(s, loc)
        for e in ir.stmt_exprs(s):
            for x in ir.walk_expr(e):
                _expression(x, loc)
                if isinstance(x, ir.Call):
                    callee = _callee(module, x)
                    if callee is None:
                        continue
                    if callee.name == fn.name:   # recursion: the pushforward calls itself
                        continue
                    if callee.name in path:
                        cycle = " -> ".join(path[path.index(callee.name):] + [callee.name])
                        raise DiffError(loc, f"mutual recursion ({cycle}) is not supported "
                                             "in forward mode; a function that calls itself is")
                    _visit(module, callee, path, done)
    path.pop()
    done.add(fn.name)


def _statement(s, loc) -> None:
    if isinstance(s, ir.Decl) and s.var.type.record:
        what = f"'{s.var.name}'" if not s.var.name.startswith(names.NEW_BUFFER) else \
            f"'new {s.var.type.base}'"
        refuse(loc, f"a struct or class object ({what})")


def _expression(x, loc) -> None:
    if isinstance(x, ir.Member):
        refuse(loc, f"a struct or class field ('.{x.name}')")
    if isinstance(x, ir.Call) and x.method:
        refuse(loc, f"a member function call ('{x.method}')")
