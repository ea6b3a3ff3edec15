"""Plan, then generate: the request graph of one differentiation (Clad's `DiffPlanner`).

A request is a function and the indices of its differentiated parameters (its mask). `plan`
analyzes the top request (normalize, activity, the reverse transform's collect walk,
to-be-recorded), reads the requests its call sites make (the mask of a call site comes from
the caller's activity there), and does the same for each new callee, depth first. A call
that closes a cycle (recursion) calls the functions being planned. The `Plan` lists every new request callees first, each
with its analyses, for `generate` to turn into text: nothing is generated while planning, and
the callback the reverse transform asks about a callee only looks its names up.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from . import ir, names
from .analysis import activity as activity_mod
from .analysis import tbr
from .analysis.effects import call_writes, written_params
from .emit import cpp
from .normalize import normalize
from .reverse import checkpoint
from .reverse.transform import Callee, Reverse



@dataclass(frozen=True)
class Analysis:
    """The analyses of one request, as the generator consumes them."""
    fn: ir.Function                      # normalized
    activity: activity_mod.Activity
    reverse: Reverse                     # after its collect walk
    split: tbr.Recording                 # what the split forward records for its sweep
    combined: tbr.Recording | None       # what the combined pullback records (top only)

    def explain(self, name: str) -> str:
        """Activity, then what the split reverse sweep records, saves and recomputes."""
        rv = self.reverse
        text = (f"== activity {name}\n{self.activity.dump()}\n"
                f"== to-be-recorded {name} (split)\n{self.split.dump(rv.describe)}\n")
        for path in sorted(rv.checkpoints):
            text += checkpoint.describe(rv.checkpoints[path], rv.describe(path)) + "\n"
        return text


@dataclass(frozen=True)
class Node:
    """One request of the graph."""
    key: tuple                           # (function name, mask)
    fn: ir.Function                      # as lowered
    base: str                            # its generated functions are base + a suffix
    adjoints: tuple                      # parameters with an adjoint buffer, in order
    top: bool                            # the requested function: also a pullback and grad
    analysis: Analysis
    callees: tuple                       # keys of the callees it differentiates, in order


@dataclass(frozen=True)
class Plan:
    top: Node
    nodes: tuple                         # the new requests, callees first, top last


def callee_names(base: str) -> Callee:
    return Callee(names.reverse_forw(base), names.reverse_sweep(base))


def callee_base(fn: ir.Function, mask: tuple) -> str:
    """`f` when every floating parameter is differentiated, else `f_d<i>_<j>...`."""
    reals = [i for i, p in enumerate(fn.params) if p.type.real]
    if list(mask) == reals:
        return fn.name
    return names.masked(fn.name, mask)


def custom_callee(module: ir.Module, name: str) -> Callee:
    """A callee with a clad::custom_derivatives pullback, and whether that pullback takes an
    adjoint for every parameter (else for the floating ones only)."""
    pullback = names.pullback(name)
    cfn = module.customs[pullback]
    g = module.functions.get(name)
    sig = module.signatures.get(name)
    nparams = len(sig) if sig is not None else None
    ret = 1 if (g is not None and g.ret.is_real_scalar) else 0
    if g is None and sig is not None:
        ret = 1 if len(cfn.params) - nparams in (nparams + 1, 1 + sum(
            1 for v in sig if v.type.real)) else 0
    if nparams is None:
        # declared only: the custom pullback's own arity tells
        all_params = True
    else:
        all_params = len(cfn.params) - nparams - ret == nparams
    return Callee("", "", cfn.name, all_params)


def adjoint_names(fn: ir.Function, act) -> dict:
    """`_d_<name>`; a variable whose adjoint would be the return seed `_d_y` gets
    `_d_y0` (or the next free suffix), as Clad does."""
    vars_ = [v for v in act.aliases.vars.values() if v.uid > 0]
    plain = {names.adjoint(v.name) for v in vars_}
    out = {v.uid: names.global_adjoint(v.name) for v in act.aliases.vars.values()
           if act.mem_key_of(v) in act.globals}
    for v in vars_:
        name = names.adjoint(v.name)
        if fn.ret.is_real_scalar and name == names.RESULT_ADJOINT:
            name = names.numbered_result_adjoint(plain)
        out[v.uid] = name
    return out


def analyze(module: ir.Module, fn: ir.Function, wrt: tuple, outputs: tuple, options,
            callee: Callable, top: bool) -> Analysis:
    """The analyses of fn differentiated on `wrt` for `outputs` (parameter Vars);
    callee(name, mask, loc, custom) -> Callee names what a call site calls."""
    nfn = normalize(fn)
    act = activity_mod.analyze(nfn, module, wrt, outputs,
                               lambda call: call_writes(module, call), options.analyses)
    rv = Reverse(module, nfn, act, adjoint_names(nfn, act), callee, options,
                 frozenset(p.uid for p in wrt + outputs))
    facts = rv.collect()
    combined = tbr.plan(facts, rv.reads, options.analyses, combined_top=True) if top else None
    split = tbr.plan(facts, rv.reads, options.analyses, combined_top=False)
    return Analysis(nfn, act, rv, split, combined)


class Planner:
    """Collects the request graph below one top request (`plan` is its entry point)."""

    def __init__(self, module: ir.Module, options, function: Callable, done: Mapping,
                 log: Callable | None):
        self.module = module
        self.options = options
        self.function = function        # name -> ir.Function, or the engine's DiffError
        self.done = done                # key -> Callee of requests generated earlier
        self.log = log or (lambda stage, text: None)
        self.path: list = []            # keys being planned, outermost first
        self.planned: dict = {}         # key -> Node, in the order they were finished

    def callee(self, name: str, mask: tuple, loc, custom: bool) -> Callee:
        """The generated functions a call site calls (the reverse transform's callback)."""
        if custom:
            return custom_callee(self.module, name)
        fn = self.function(name)
        key = (name, mask)
        if key in self.done:
            return self.done[key]
        if key in self.planned:
            return callee_names(self.planned[key].base)
        # a recursive call (key on the path) calls the functions being planned: the pullback
        # calls itself, and the tape stays in step since each call pops what it pushed
        return callee_names(callee_base(fn, mask))

    def visit(self, fn: ir.Function, wrt: tuple, outputs: tuple, adjoints: tuple, top: bool,
              base: str) -> Node:
        key = (fn.name, tuple(fn.params.index(p) for p in adjoints))
        self.log("lowered " + fn.name, cpp.function(fn.name, fn.ret, [(p.type, p.name)
                                                                      for p in fn.params],
                                                    fn.body.stmts, fn.template))
        self.path.append(key)
        try:
            an = analyze(self.module, fn, wrt, outputs, self.options, self.callee, top)
            self.log("normalized " + fn.name, cpp.block_text(an.fn.body.stmts))
            self.log("activity " + fn.name, an.activity.dump())
            self.log("to-be-recorded (split) " + fn.name, an.split.dump(an.reverse.describe))
            callees = self._callees(an.reverse)
            for k in callees:
                if k not in self.done and k not in self.planned and k not in self.path:
                    self._visit_callee(*k)
        finally:
            self.path.pop()
        node = Node(key, fn, base, adjoints, top, an, callees)
        self.planned[key] = node
        return node

    def _visit_callee(self, name: str, mask: tuple):
        fn = self.function(name)
        adj = tuple(fn.params[i] for i in mask)
        outputs = tuple(fn.params[i] for i in sorted(written_params(fn)) if i in mask)
        self.visit(fn, adj, outputs, adj, False, callee_base(fn, mask))

    @staticmethod
    def _callees(rv: Reverse) -> tuple:
        """(name, mask) of every differentiated call without a custom pullback, in the
        order the collect walk met them, once each."""
        out: dict = {}
        for call, info, mask in rv.calls.values():
            if info is not None and not info.custom:
                out.setdefault((ir.function_key(call.fn), mask), None)
        return tuple(out)


def plan(module: ir.Module, options, function: Callable, done: Mapping, fn: ir.Function,
         wrt: tuple, outputs: tuple, adjoints: tuple, log: Callable | None = None) -> Plan:
    """The request graph of fn differentiated on `wrt` (parameter Vars) for `outputs`, with
    adjoint buffers for `adjoints`; `done` maps the (name, mask) requests generated before to
    their Callee, `function(name)` finds a callee or raises the engine's DiffError."""
    planner = Planner(module, options, function, done, log)
    top = planner.visit(fn, wrt, outputs, adjoints, True, fn.name)
    return Plan(top, tuple(planner.planned.values()))
