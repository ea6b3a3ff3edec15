"""The two top-level forward requests the driver makes.

- `pushforward`: `f_pushforward(params..., tangents...)` with a tangent for every `wrt`
  parameter and every floating output array, in parameter order (Clad's pushforward), and
  `f_darg<k>(params...)` (Clad's `clad::differentiate(f, "x")`) when `wrt` is one floating
  scalar of a function returning one and no array needs a tangent.
- `pullback_pushforward`: forward over reverse, `f_pullback_pushforward(pullback params...,
  tangents...)`, the pushforward of the generated pullback, with tangents on the `wrt`
  parameters, the output arrays, the seed and every adjoint: with the tangent e_j on the
  inputs and 0 on the rest, the adjoints' tangents are column j of the Hessian (of the
  seeded result), and the outputs' tangents are J e_j. The adjoint `_d_g` of a global `g`
  is a global of the generated code; its tangent is the global `_dt__d_g`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .. import ir, names
from . import shared
from .generated import renumber
from .plan import ForwardPlanner, generate
from .support import check


@dataclass(frozen=True)
class Result:
    functions: tuple              # ((name, text), ...), callees first
    mask: tuple                   # indices of the top function's parameters with a tangent
    darg: "int | None" = None     # the parameter of f_darg<k>, if generated


def _texts(planner: ForwardPlanner) -> tuple:
    return shared.declarations(planner.globals_used()) + \
        tuple((n.name, generate(n, planner)) for n in planner.planned.values())


def pushforward(module: ir.Module, options, fn: ir.Function, wrt: tuple,
                outputs: tuple) -> Result:
    planner = ForwardPlanner(module, options, {})
    if names.pushforward(fn.name) not in module.customs:
        check(module, fn)
    if names.pushforward(fn.name) in module.customs:
        # a custom pushforward: f_pushforward calls it (the body is not differentiated)
        call = ir.Call(fn.name, tuple(fn.params), fn.ret, True)
        body = ir.Return(call, fn.loc) if fn.ret.base != "void" else ir.ExprStmt(call, fn.loc)
        fn = replace(fn, body=ir.Block((body,)))
    mask = tuple(i for i, p in enumerate(fn.params) if p in wrt or p in outputs)
    planner.visit(fn, mask, "top", top_name=names.pushforward(fn.name))
    darg = None
    if len(wrt) == 1 and wrt[0].type.is_real_scalar and fn.ret.is_real_scalar:
        k = fn.params.index(wrt[0])
        if planner.visit(fn, (k,), "darg") is not None:
            darg = k
    return Result(_texts(planner), mask, darg)


def pullback_pushforward(module: ir.Module, options, generated: dict, fn: ir.Function,
                         wrt: tuple, outputs: tuple) -> Result:
    """`generated`: name -> IR of every function the reverse generated (the pullback of fn
    among them)."""
    check(module, fn)
    module = shared.with_adjoint_globals(module)
    fixed = {g.var.name: g.var.uid for g in module.globals.values()}
    registry = {n: renumber(f, fixed) for n, f in generated.items()}
    pb = registry[names.pullback(fn.name)]
    n = len(fn.params)
    mask = tuple(i for i, p in enumerate(fn.params) if p in wrt or p in outputs) + \
        tuple(range(n, len(pb.params)))
    planner = ForwardPlanner(module, options, registry)
    planner.visit(pb, mask, "top", generated=True,
                  top_name=names.pushforward(names.pullback(fn.name)))
    return Result(_texts(planner), mask)
