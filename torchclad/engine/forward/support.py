"""What forward mode refuses, with a DiffError at the construct before anything is emitted.

Forward mode (f_pushforward, f_darg<k>, and f_pullback_pushforward: jvp, double backward,
Hessians) takes the C++ reverse mode takes -- structs and member functions, recursion,
pointer- and reference-returning calls, globals written -- except:

- mutual recursion (f calls g calls f), checked here over fn and every function it calls:
  the generated functions would call each other before their declarations. A function that
  calls itself is differentiated: its pushforward calls itself;
- a call none of whose arguments depends on the inputs, of a function that touches a
  non-const global (`refuse`, where plan.py meets the call): the callee would run as it is
  and leave the global's tangent stale.
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
    for s in ir.walk_stmts(fn.body):
        loc = getattr(s, "loc", None) or fn.loc
        for e in ir.stmt_exprs(s):
            for x in ir.walk_expr(e):
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
