"""The reverse of a statement that calls a function: the callee's reverse sweep (or its
custom pullback) with the adjoints of the call's arguments."""
from __future__ import annotations

import re
from dataclasses import dataclass

from .. import ir, names
from ..analysis.effects import global_effects
from ..errors import DiffError
from .adjoint import ZERO

#: the tape every generated forward records on and every sweep reads back
TAPE = ir.Var(names.TAPE, ir.Type("torchclad::Tape"), 0)


@dataclass(frozen=True)
class Parts:
    """Adjoint code of one statement: pre runs before the restore of the overwritten value,
    post after it."""
    pre: tuple = ()
    post: tuple = ()

    @property
    def empty(self) -> bool:
        return not self.pre and not self.post


@dataclass(frozen=True)
class Callee:
    forw: str            # name of the callee's augmented forward
    sweep: str           # name of its reverse sweep
    custom: str = ""     # clad::custom_derivatives pullback name, if one is used
    custom_all_params: bool = True


def call_parts(rv, s, p, call) -> Parts:
    """The adjoint code of a leaf statement that calls a user function (or one with a custom
    derivative): its callee's sweep (or custom pullback) and the adjoints of its by-value
    floating arguments."""
    R = rv.rules
    name = ir.function_key(call.fn)
    callee_fn = rv.module.functions.get(name)
    custom = rv.custom_name(call)
    n = len(call.args)
    mask = []
    for i, a in enumerate(call.args):
        if a.type.is_memory:
            r = rv.al.root_of(a)
            if r is None and a.type.real and not ir.is_null(a):
                raise DiffError(s.loc, f"cannot tell which array argument {i + 1} of "
                                       f"'{name}' points into; pass a parameter or local "
                                       "array plus an offset")
            act = a.type.real and r is not None and rv.act.is_active(rv.al.mem_key(r))
        else:
            act = rv.act.expr_active(a)
        if act:
            mask.append(i)
    target = s.var if isinstance(s, ir.Decl) else (s.target if isinstance(s, ir.Assign)
                                                    else None)
    tgt_active = target is not None and R.target_active(target)
    gread, gwritten = global_effects(rv.module, callee_fn) if callee_fn else ((), ())
    if not mask and not (set(gread) | set(gwritten)):
        # no active argument: a constant; its callee is not differentiated
        rv.calls[p] = (call, None, ())
        if tgt_active:      # the target's old value, and its adjoint, are gone
            adj = R.adj_lvalue(target) if not isinstance(s, ir.Decl) else None
            return Parts((ir.Assign("=", adj, ZERO),) if adj is not None else (), ())
        return Parts()
    if callee_fn is None and not custom:
        if name in rv.module.broken:
            raise rv.module.broken[name]
        raise DiffError(s.loc, f"no definition or custom derivative for '{name}'")
    info = rv.request_callee(name, tuple(mask), s.loc, bool(custom))
    rv.calls[p] = (call, info, tuple(mask))
    pre: list = []
    post: list = []
    ret_real = call.type.real and not call.type.is_pointer
    if callee_fn is not None:
        ret_real = callee_fn.ret.real and not callee_fn.ret.is_pointer
    d = ir.Cast(ZERO, call.type.value(), "fn") if ret_real else None
    if tgt_active:
        adj = R.adj_lvalue(target) if not isinstance(s, ir.Decl) else R.adj_var(s.var)
        snap = rv.snip_names.fresh(names.ADJOINT_TEMP_PREFIX, adj.type)
        pre = [ir.Decl(snap, adj), ir.Assign("=", adj, ZERO)]
        d = snap
    params = callee_fn.params if callee_fn is not None else \
        rv.module.customs[custom].params[:n]
    adj_args, scalars = adjoint_args(rv, call, callee_fn, params, mask, info, post)
    targs = template_args(call.fn)
    if info.custom:
        args = call.args + ((d,) if ret_real else ()) + tuple(adj_args)
        fn_text = "clad::custom_derivatives::" + info.custom + targs
    else:
        args = call.args + ((d,) if ret_real else ()) + tuple(adj_args) + (TAPE,)
        fn_text = info.sweep + targs
    post.append(ir.ExprStmt(ir.Call(fn_text, tuple(args), ir.VOID, False)))
    for i, tmp in scalars.items():
        R.backprop(call.args[i], tmp, post)
    return Parts(tuple(pre), tuple(post))

def adjoint_args(rv, call, callee_fn, params, mask, info, post: list) -> tuple:
    """The adjoint arguments of a call's sweep (or custom pullback), and the temporaries
    (argument index -> local) that receive the adjoints of its active scalar arguments
    (their declarations are appended to post)."""
    R = rv.rules
    scalars = {}
    adj_args = []
    for i, a in enumerate(call.args):
        pt = params[i].type if i < len(params) else a.type
        real_param = pt.real
        if i in mask:
            if a.type.is_memory:
                adj_args.append(R.adj_ptr(a))
            else:
                base = pt.base
                if callee_fn is not None and base in callee_fn.template:
                    base = a.type.base if a.type.real else "double"
                tmp = rv.snip_names.fresh(names.CALL_ADJOINT_PREFIX, ir.Type(base, 0, False, (), True))
                post.append(ir.Decl(tmp, ir.Cast(ZERO, tmp.type, "fn")))
                scalars[i] = tmp
                adj_args.append(ir.Unary("&", tmp, tmp.type.pointer_to()))
        elif info.custom and (info.custom_all_params or real_param):
            # a typed null, so a template custom pullback still deduces its T
            # the argument's own type, spelled in the caller (a template caller's T)
            base = a.type.base if (a.type.real or a.type.is_memory) else pt.base
            if base == "void":          # a bare nullptr: the type of the real arrays
                base = next((x.type.base for x in call.args
                             if x.type.real and x.type.is_memory), "double")
            nt = ir.Type(base, 1, False, (), a.type.real or base != pt.base)
            adj_args.append(ir.Cast(ir.Const("nullptr", nt), nt, "c"))
    return adj_args, scalars


def template_args(spelled: str) -> str:
    """`<T>` of a callee spelled `f<T>` (kept on the generated calls), else ''."""
    m = re.search(r"(<.*>)\s*$", spelled)
    return m.group(1) if m else ""
