"""Plan, then generate, in forward mode: the request graph of one pushforward.

A request is a function -- a user's, or one the reverse generated (forward over reverse) --
and the indices of its parameters that carry tangents (its mask). `ForwardPlanner.visit`
analyzes a request (normalize for user code, the tangent analysis), reads the requests its
call sites make (a call site's mask: the arguments with tangents there) and plans each new
callee first, depth first. `generate` then turns every planned request into text, callees
first; nothing is generated while planning.

Generated functions, for a function `f` and a mask:

    f_pushforward(params..., tangents of the masked params...)   Clad's pushforward
    f_darg<k>(params...)                                         top request, one scalar k

`f` is suffixed `_d<i>_<j>` when the mask is not every floating parameter (as in reverse
mode). A call to a function with a custom pushforward (clad::custom_derivatives::f_pushforward,
Clad's signature: the parameters, then a tangent for every parameter or for every floating
one) calls it instead, and a custom pullback called from generated code is differentiated by
its custom pushforward (f_pullback_pushforward).
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import ir, names
from ..analysis.effects import call_writes, returned_param, written_params
from ..emit import cpp
from ..generate import uses_tape
from ..errors import DiffError
from ..normalize import normalize
from ..opt.simplify import cse_calls, dead_code
from .activity import Tangents, analyze
from . import shared
from .generated import declared_names
from .support import refuse
from .tangent import ZERO, real
from .transform import CalleeInfo, Forward, value_and_pushforward

CUSTOM_NS = "clad::custom_derivatives::"


@dataclass(frozen=True)
class FNode:
    """One request of the graph."""
    key: tuple                    # (function name, mask, kind)
    fn: ir.Function               # as differentiated (normalized user code, or generated)
    name: str                     # the generated function's name
    mask: tuple                   # indices of the parameters with a tangent parameter
    tangents: Tangents
    tnames: dict                  # uid -> tangent name
    generated: bool               # fn is generated code (its tape carries tangents)
    callees: tuple                # keys of the requests its call sites make


def _short(name: str) -> str:
    return name.split("::")[-1]


def _floating(p) -> bool:
    return p.type.real


class ForwardPlanner:
    """Collects the forward request graph below one or more top requests; also the call-site
    protocol the transform asks (`differentiated`, `info`)."""

    def __init__(self, module: ir.Module, options, registry: dict):
        self.module = module
        self.options = options
        self.registry = registry        # generated function name -> renumbered IR
        self.planned: dict = {}         # key -> FNode, callees first
        self.path: list = []

    # ------------------------------------------------------------------ call sites
    def custom(self, call: ir.Call) -> "ir.Function | None":
        return self.module.customs.get(names.pushforward(_short(ir.call_name(call.fn))))

    def differentiated(self, call: ir.Call) -> bool:
        name = ir.call_name(call.fn)
        return bool(self.custom(call) is not None or call.user or name in self.registry or
                    name.startswith(CUSTOM_NS))

    def function(self, call: ir.Call, loc) -> ir.Function:
        """The function a differentiated call calls: generated, the user's, or the body of a
        custom derivative (forward mode over a custom pullback differentiates it)."""
        name = ir.call_name(call.fn)
        if name in self.registry:
            return self.registry[name]
        if call.user and ir.function_key(call.fn) in self.module.functions:
            return self.module.functions[ir.function_key(call.fn)]
        short = _short(name)
        if name.startswith(CUSTOM_NS) and short in self.module.custom_bodies:
            return self.module.custom_bodies[short]
        hint = ""
        if names.pullback(short) in self.module.customs:
            hint = (f"; it has a custom pullback, which reverse mode uses: forward mode needs "
                    f"{CUSTOM_NS}{names.pushforward(short)}")
        if name in self.module.broken or short in self.module.broken:
            e = self.module.broken.get(name) or self.module.broken[short]
            raise DiffError(None, str(e) + hint)
        raise DiffError(loc, f"no derivative for call to '{name}': define '{name}' in this "
                             "source, or give it a custom derivative "
                             f"{CUSTOM_NS}{names.pushforward(short)}{hint}")

    def writes(self, call: ir.Call):
        """Indices of the arguments a differentiated call may write; None for math."""
        if not self.differentiated(call):
            return None
        if call.user and ir.function_key(call.fn) in self.module.functions:
            return call_writes(self.module, call)
        return {i for i, a in enumerate(call.args)
                if a.type.is_pointer and not a.type.const and a.type.real}

    def returns(self, call: ir.Call) -> "int | None":
        """The index of the argument whose memory the pointer (or reference) a differentiated
        call returns points into; None for none, or a call the engine does not differentiate."""
        if not call.type.ptr or not self.differentiated(call) or self.custom(call) is not None:
            return None
        return returned_param(self.module, self.function(call, None))

    def info(self, call: ir.Call, mask: tuple, loc) -> CalleeInfo:
        void = call.type.base == "void"
        cfn = self.custom(call)
        if cfn is not None:
            n = len(call.args)
            floats = tuple(i for i, a in enumerate(call.args)
                           if a.type.real or (a.type.is_memory and a.type.real))
            extra = len(cfn.params) - n
            if extra == n:
                slots = tuple(range(n))
            elif extra == len(floats):
                slots = floats
            else:
                raise DiffError(cfn.loc, f"custom derivative '{cfn.name}' takes "
                                         f"{len(cfn.params)} parameters; expected {n} + {n} (or "
                                         f"{n} + {len(floats)} tangents of the floating "
                                         "parameters)")
            return CalleeInfo(CUSTOM_NS + cfn.name, slots, void)
        fn = self.function(call, loc)
        return CalleeInfo(self.node_name(fn, mask), mask, void)

    def no_tangents(self, call: ir.Call, loc) -> None:
        """A differentiated call none of whose arguments has a tangent runs as it is: refused
        when the callee touches a global with a tangent (it would leave that tangent stale)."""
        key = ir.function_key(call.fn)
        if call.user and key in self.module.functions and self.custom(call) is None and \
                shared.reached(self.module, self.module.functions[key]):
            refuse(loc, f"a call of '{key}', which touches a non-const global, with no argument "
                        "that depends on the inputs")

    def node_name(self, fn: ir.Function, mask: tuple) -> str:
        reals = tuple(i for i, p in enumerate(fn.params) if _floating(p))
        base = fn.name if mask == reals else names.masked(fn.name, mask)
        return names.pushforward(base)

    # ------------------------------------------------------------------ planning
    def visit(self, fn: ir.Function, mask: tuple, kind: str = "pushforward",
              generated: bool = False, top_name: str = "") -> "FNode | None":
        """Plan `fn` with tangents on the params at `mask`. kind: "pushforward" (a callee),
        "top" (the requested pushforward, named `top_name`), or "darg" (the one scalar at
        mask[0] and no tangent parameters; None when a pointer parameter would need one)."""
        key = (fn.name, mask, kind)
        if key in self.planned:
            return self.planned[key]
        if key in self.path:
            return None      # recursion: the pushforward calls itself (its name is known)
        nfn = fn if generated else normalize(fn)
        wrt = tuple(fn.params[i] for i in mask)
        if kind == "darg":
            outputs = ()
        elif generated:
            outputs = tuple(p for p in wrt if p.type.is_pointer and not p.type.const)
        else:
            written = written_params(fn)
            outputs = tuple(fn.params[i] for i in mask if i in written)
        tangents = analyze(nfn, self.module.globals, wrt, outputs, self.writes,
                           self.options.analyses, tape=generated, returns=self.returns)
        if kind == "darg" and any(p.type.is_pointer and tangents.var(p) for p in fn.params):
            return None
        self.path.append(key)
        try:
            callees = []
            for call, cmask, loc in self.calls(nfn, tangents):
                if self.custom(call) is not None:
                    continue
                cfn = self.function(call, loc)
                ckey = (cfn.name, cmask, "pushforward")
                if ckey not in callees:
                    callees.append(ckey)
                self.visit(cfn, cmask, "pushforward", cfn.name in self.registry)
        finally:
            self.path.pop()
        name = names.darg(fn.name, mask[0]) if kind == "darg" else \
            top_name or self.node_name(fn, mask)
        tnames = {**shared.tangent_names(self.module), **tangent_names(nfn, tangents, wrt)}
        node = FNode(key, nfn, name, mask, tangents, tnames, generated, tuple(callees))
        self.planned[key] = node
        return node

    def globals_used(self) -> list:
        """The globals with a tangent that the planned functions touch."""
        return shared.used(self.module, [n.fn for n in self.planned.values()])

    def calls(self, fn: ir.Function, tangents: Tangents):
        """(call, mask, loc) of every differentiated call that has tangent arguments."""
        for s in ir.walk_stmts(fn.body):
            e = s.init if isinstance(s, ir.Decl) else s.value if isinstance(s, ir.Assign) else \
                s.expr if isinstance(s, ir.ExprStmt) else None
            if isinstance(e, ir.Call) and self.differentiated(e):
                mask = tuple(i for i, a in enumerate(e.args) if tangents.arg(a))
                if mask:
                    yield e, mask, getattr(s, "loc", None)


def tangent_names(fn: ir.Function, tangents: Tangents, params: tuple) -> dict:
    """uid -> tangent name for the given parameters and every variable with a tangent:
    `_d_x`, numbered where the name is taken."""
    taken = declared_names(fn)
    out: dict = {}
    seen = set()
    decls = [p for p in fn.params] + [s.var for s in ir.walk_stmts(fn.body)
                                       if isinstance(s, (ir.Decl, ir.VectorDecl))]
    for v in decls:
        if v.uid in seen:
            continue
        seen.add(v.uid)
        has = v in params or (v.type.real and tangents.var(v))
        if has:
            name = names.tangent(v.name, taken)
            taken.add(name)
            out[v.uid] = name
    return out


def generate(node: FNode, planner: ForwardPlanner) -> str:
    """The text of one planned request."""
    fn = node.fn
    taken = declared_names(fn) | set(node.tnames.values())
    mode = "darg" if node.key[2] == "darg" else "generated" if node.generated else "pushforward"
    fw = Forward(fn, node.tangents, node.tnames, planner, mode, taken)
    body = list(fw.block(fn.body).stmts)
    if not node.generated:        # (generated code has its own _cse temporaries)
        body = cse_calls(body)
    tape = [x for x in body if isinstance(x, ir.Decl) and x.var.name == names.TAPE]
    body = dead_code([x for x in body if x not in tape])     # (it sees no use of the tape)
    if tape and uses_tape(body):
        body = tape + body
    params = [(p.type, p.name) for p in fn.params]
    body = _local_tangents(fn, node) + body
    if node.key[2] in ("top", "darg"):
        body = shared.resets(planner.globals_used()) + body
    if node.key[2] == "darg":
        p = fn.params[node.mask[0]]
        body = [ir.Decl(ir.Var(node.tnames[p.uid], real(p.type)), ir.Const("1", ir.INT))] + body
        ret = fn.ret
    else:
        for i in node.mask:
            p = fn.params[i]
            t = real(p.type) if not p.type.is_memory else \
                ir.Type(p.type.base, p.type.ptr, p.type.const, p.type.dims, True)
            params.append((t, node.tnames[p.uid]))
        ret = value_and_pushforward(fn.ret) if fn.ret.base != "void" else ir.VOID
    return cpp.function(node.name, ret, params, body, fn.template)


def _local_tangents(fn: ir.Function, node: FNode) -> list:
    """A scalar parameter outside the mask that the body makes depend on one inside it
    (`j = 2 * i` with j not in wrt) has a local tangent, zero on entry: the caller passes
    none."""
    out = []
    for i, p in enumerate(fn.params):
        if i in node.mask or p.uid not in node.tnames or (node.key[2] == "darg" and
                                                          i == node.mask[0]):
            continue
        if p.type.is_memory:
            raise DiffError(fn.loc, f"parameter '{p.name}' is written from differentiated "
                                    "values but is not differentiated: forward mode needs it "
                                    "among wrt")
        out.append(ir.Decl(ir.Var(node.tnames[p.uid], real(p.type)), ZERO))
    return out
