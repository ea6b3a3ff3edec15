"""Generate the functions of one planned request, as C++ text: pure functions of the plan.

For a request with base `f`: the split pair `f_reverse_forw` / `f_reverse_sweep` (what a
caller's forward and sweep call), and for the top request the combined `f_pullback` and, when
f returns a floating value, `f_grad`. Callees are generated before their callers, so a
caller's `writes_primal` can ask what its callees' sweeps write.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from . import ir, names
from .analysis import activity as activity_mod
from .analysis.effects import written_params
from .analysis.outputs import once_written
from .emit import cpp
from .errors import DiffError
from .opt.fission import fission
from .opt.interchange import interchange
from .opt.loop_order import forward_order
from .opt.promote import derived_pointers, promote_accumulations
from .opt.simplify import cse_calls, dead_code, dead_resets
from .opt.unswitch import unswitch
from .plan import Node
from .reverse.assemble import Assembler
from .reverse.assign import elementwise_assign
from .reverse import rows as rows_mod
from .reverse.first_pass import fold_zeroing

TAPE_TYPE = ir.Type("torchclad::Tape")
TAPE_PARAM = (ir.Type("torchclad::Tape&"), names.TAPE)
# the statement kinds whose writes `writes_primal` reads off their fields
MODELED = (ir.Decl, ir.Assign, ir.ExprStmt, ir.Block, ir.If, ir.Loop, ir.Switch, ir.Case,
           ir.Break, ir.Continue, ir.Return, ir.TapePush, ir.TapeArray, ir.VectorDecl,
           ir.Comment)


@dataclass(frozen=True)
class Generated:
    texts: tuple                  # ((name, text), ...) in output order
    sweep_writes_primal: bool     # may the reverse sweep write primal memory
    notes: tuple = ()             # ((loc, text), ...): pragmas not kept, loops left serial
    functions: tuple = ()         # the same functions as IR (forward mode differentiates them)
    # the assigning sweep's input adjoints: ((adjoint param uid, extent param uid), ...), see
    # reverse/assign.py; extent None: that adjoint is accumulated into (the caller zeroes it).
    # Empty when there is no assigning sweep, or a custom one
    assign_extents: tuple = ()
    # the int parameters (uids) that must be >= 0 for the assigning sweep (its proof assumes
    # them so: analysis/outputs.py); the caller runs the accumulating sweep otherwise
    assign_nonneg: tuple = ()
    # the assigning sweep's input adjoints that are a copy of a seed, element for element:
    # ((adjoint param uid, seed param uid), ...), see reverse/assign.py
    assign_copies: tuple = ()


@dataclass(frozen=True)
class Parameters:
    """The parameter lists the generated functions of one request share, as (Type, name)."""
    params: list                  # the primal's
    seed: list                    # [(_d_y)] for a floating return value, else []
    adjoints: list                # the adjoint buffers


def parameters(fn: ir.Function, adjoints: tuple, adj_names: dict) -> Parameters:
    return Parameters([(p.type, p.name) for p in fn.params],
                     [(fn.ret.value(), names.RESULT_ADJOINT)] if fn.ret.is_real_scalar else [],
                     [(ir.Type(p.type.base, 1, False, (), True), adj_names[p.uid])
                      for p in adjoints])


def _var(param: tuple) -> ir.Var:
    return ir.Var(param[1], param[0])


def _arg(v: ir.Var) -> ir.Expr:
    """A parameter passed on as it was received (a reference as the object it binds)."""
    if v.type.ref:
        return ir.Index(v, ir.Const("0", ir.INT), v.type.element())
    return v


def _function(name: str, ret: ir.Type, params: list, body: list, template: tuple,
              comment: str = "") -> tuple:
    """(name, text, IR) of one generated function; params as (Type, name)."""
    text = cpp.function(name, ret, params, body, template, comment)
    return name, text, ir.Function(name, tuple(map(_var, params)), ret,
                                   ir.Block(tuple(body)), template)


def pullback_and_grad(base: str, fn: ir.Function, sig: Parameters, body: list,
                      comment: str = "") -> list:
    """`base_pullback` with `body`, then `base_grad` (seed 1) when fn returns a floating
    value."""
    pb = names.pullback(base)
    out = [_function(pb, ir.VOID, sig.params + sig.seed + sig.adjoints, body, fn.template,
                     comment)]
    if fn.ret.is_real_scalar:
        one = ir.Cast(ir.Const("1", ir.INT), fn.ret.value(), "fn")
        args = tuple(_arg(_var(p)) for p in sig.params) + (one,) + \
            tuple(map(_var, sig.adjoints))
        out.append(_function(names.grad(base), ir.VOID, sig.params + sig.adjoints,
                             [ir.ExprStmt(ir.Call(pb, args, ir.VOID))], fn.template))
    return out


def split_pair(base: str, fn: ir.Function, sig: Parameters, forward: list,
               sweep: list) -> list:
    """`base_reverse_forw` and `base_reverse_sweep` with the given bodies."""
    return [_function(names.reverse_forw(base), fn.ret, sig.params + [TAPE_PARAM], forward,
                      fn.template),
            _function(names.reverse_sweep(base), ir.VOID,
                      sig.params + sig.seed + sig.adjoints + [TAPE_PARAM], sweep, fn.template)]


def generate(node: Node, module: ir.Module, sweep_writes: Mapping) -> Generated:
    """The functions of one request; sweep_writes: generated sweep name -> whether it may
    write primal memory (the callees', generated before)."""
    an, fn = node.analysis, node.fn
    rv, body = an.reverse, an.fn.body
    roots = set(rv.adj_names.values())
    sig = parameters(fn, node.adjoints, rv.adj_names)
    groups = [{rv.adj_names[p.uid] for p in fn.params if p.name in g and p.uid in rv.adj_names}
              for g in overlapping(module, fn)]
    fwd_asm = Assembler(rv, an.split, split=True, overlaps=groups)
    flags = disjoint_flags(rv, an.split)
    fixed = fixed_pointers(an)
    forward = flags + unswitch(dead_code(fwd_asm.fwd_block(body, (), top=True)), fixed)
    promote = promotion(module, fn, roots)
    sweep, sweep_notes = split_sweep(node, groups, promote)
    writes = writes_primal(fn, sweep, roots, sweep_writes)
    decls, reset = global_adjoints(an)
    texts = list(decls)
    notes = fwd_asm.notes + sweep_notes
    if node.top:
        asm = Assembler(rv, an.combined, split=False, overlaps=groups)
        combined = reset + disjoint_flags(rv, an.combined) + promote(unswitch(dead_resets(
            dead_code(cse_calls(asm.fwd_block(body, (), top=True) +
                                asm.rev_block(body, (), top=True)))), fixed))
        if uses_tape(combined):
            combined = [ir.Decl(ir.Var(names.TAPE, TAPE_TYPE))] + combined
        texts += pullback_and_grad(node.base, fn, sig, combined)
        notes += asm.notes
    texts += split_pair(node.base, fn, sig, reset + forward, sweep)
    extents, nonneg, copies = (), (), {}
    if node.top and not reset:
        variant = elementwise_assign(an.fn, sweep, node.adjoints, written_params(an.fn),
                                     rv.adj_names)
        if variant is not None:
            body, ext, copies = variant
        else:
            variant = read_only_sweep(node, groups, promote)
            if variant is not None:
                body, ext, nonneg = variant
        if variant is not None:
            texts.append(_function(names.reverse_sweep_assign(node.base), ir.VOID,
                                   sig.params + sig.seed + sig.adjoints + [TAPE_PARAM],
                                   body, fn.template))
            extents = tuple(ext.items())
    return Generated(tuple((n, t) for n, t, _ in texts), writes,
                     tuple(dict.fromkeys(notes)), tuple(f for _, _, f in texts if f), extents,
                     nonneg, tuple(copies.items()))


def fixed_pointers(an) -> frozenset:
    """uids of the pointer parameters the function never assigns nor takes the address of:
    their null tests have one value throughout (opt/unswitch.py)."""
    return frozenset(p.uid for p in an.fn.params
                     if p.type.ptr and not p.type.ref and an.reverse.facts.fixed_param(p.uid))


def split_sweep(node: Node, groups: list, promote, read_only: frozenset = frozenset(),
                rows: dict | None = None) -> "tuple[list, list]":
    """The body of the split-mode reverse sweep, assembled and optimised, and the assembler's
    notes; read_only: seeds whose resets are left out (read_only_sweep); rows: when given,
    receives the rows.Row of each input adjoint the sweep zeroes row by row itself."""
    an = node.analysis
    rv = an.reverse
    asm = Assembler(rv, an.split, split=True, overlaps=groups, read_only=read_only,
                    owned_rows=rows is not None)
    body = disjoint_flags(rv, an.split) + promote(unswitch(dead_resets(dead_code(cse_calls(
        asm.rev_block(an.fn.body, (), top=True)))), fixed_pointers(an)))
    if rows is not None:
        rows.update(asm.rows)
    return body, asm.notes


def read_only_sweep(node: Node, groups: list, promote) -> "tuple | None":
    """(body, {input adjoint uid: extent}, nonneg uids) of the sweep that never writes a
    seed, for a kernel whose outputs are written at most once per element and never read
    (analysis/outputs.py): the sweep assembled again without the seed resets, optimised
    alike. It adds into its input adjoints as the sweep does (extent None: the caller zeroes
    them), except those whose rows each iteration owns and zeroes itself (reverse/rows.py;
    extent: the parameter uids whose product is the number of elements so written) or
    assigns in its first pass over the row (reverse/first_pass.py). None when the proof
    fails."""
    an = node.analysis
    rv = an.reverse
    index = {p.uid: k for k, p in enumerate(an.fn.params)}
    written = written_params(an.fn)
    seeds = [p for p in node.adjoints if index.get(p.uid) in written]
    inputs = [p for p in node.adjoints if p not in seeds]
    if not seeds or not inputs:
        return None
    nonneg = once_written(rv, seeds)
    if nonneg is None:
        return None
    read_only = frozenset(rv.adj_names[p.uid] for p in seeds)
    rows: dict = {}
    body, _ = split_sweep(node, groups, promote, read_only, rows)  # its notes are the sweep's
    if any(not rows_mod.placed(body, root, row) for root, row in rows.items()):
        rows = {}                        # a pass moved a zeroing loop: zero-fill instead
        body, _ = split_sweep(node, groups, promote, read_only)
    for root, row in rows.items():       # the first pass over a row assigns it, if it can
        body = fold_zeroing(body, root, row)
    for s in body:
        for x in ir.walk_stmts(s):
            if isinstance(x, ir.Assign) and not isinstance(x.target, ir.Var):
                r = ir.root_var(x.target)
                if r is None or r.name in read_only:
                    return None          # still writes a seed (or memory it cannot name)
    ext = {}
    for p in inputs:
        row = rows.get(rv.adj_names[p.uid])
        if row is None:
            ext[p.uid] = None
        else:
            ext[p.uid] = row.extent
            nonneg = nonneg | set(row.nonneg)
    return body, ext, tuple(sorted(nonneg))


def disjoint_flags(rv, rec) -> list:
    """`bool _disjoint<k> = <test>;` for each condition of rec's conditional records: on
    entry, whether the elements those writes overwrite are never read before them (then
    they record nothing)."""
    regions = rv.facts.regions
    return [ir.Decl(ir.Var(names.numbered(names.DISJOINT_FLAG, k), ir.BOOL, 0),
                    regions.condition(facts))
            for k, facts in enumerate(rec.conditions())]


def global_adjoints(an) -> tuple:
    """The adjoints of the non-const floating globals fn touches: their declarations (global
    variables of the generated code, as (name, text) entries) and the statements that zero
    them, which start every forward: the adjoint of a global flows between the functions of
    one call, and a call starts from zero."""
    rv = an.reverse
    decls, reset = [], []
    for v in sorted((v for v in rv.al.vars.values() if v.uid < 0 and
                     an.activity.mem_key_of(v) in an.activity.globals), key=lambda v: -v.uid):
        t = ir.Type(v.type.base, 0, False, v.type.dims, True)
        a = ir.Var(rv.adj_names[v.uid], t, 0)
        if t.dims:
            d = ir.Decl(a, None, (ir.Const("{}", t),))
            k = ir.Var(names.numbered(names.RESET_INDEX, 0), ir.LONG, 0)
            reset.append(ir.Loop((ir.Decl(k, ir.Const("0", ir.LONG)),),
                                 ir.Binary("<", k, ir.element_count(t), ir.BOOL),
                                 (ir.Assign("+=", k, ir.Const("1", ir.INT)),),
                                 ir.Block((ir.Assign("=", ir.Index(a, k, t.element()),
                                                     ir.Const("0", ir.INT)),))))
        else:
            d = ir.Decl(a, ir.Cast(ir.Const("0", ir.INT), t, "fn"))
            reset.append(ir.Assign("=", a, ir.Const("0", ir.INT)))
        decls.append((a.name, cpp.block_text([d]) + "\n", None))
    return decls, reset


def generate_custom(fn: ir.Function, adjoints: tuple, module: ir.Module) -> Generated:
    """A requested function with a clad::custom_derivatives pullback: the pullback and the
    split pair call the primal and the custom pullback (no body is differentiated)."""
    cfn = module.customs[names.pullback(fn.name)]
    n, ret = len(fn.params), (1 if fn.ret.is_real_scalar else 0)
    n_adj = len(cfn.params) - n - ret
    reals = [p for p in fn.params if p.type.real]
    if n_adj == n:
        slots = list(fn.params)
    elif n_adj == len(reals):
        slots = reals
    else:
        raise DiffError(cfn.loc, f"custom derivative '{cfn.name}' takes {len(cfn.params)} "
                                 f"parameters; expected {n} + {ret} + {n} (or "
                                 f"{len(reals)} adjoints of the floating parameters)")
    sig = parameters(fn, adjoints, {p.uid: names.adjoint(p.name) for p in fn.params})
    adj = {p.uid: _var(a) for p, a in zip(adjoints, sig.adjoints)}
    null = ir.Const("nullptr", ir.VOID.pointer_to())
    custom_args = tuple(map(_arg, fn.params)) + tuple(map(_var, sig.seed)) + \
        tuple(adj.get(p.uid, null) for p in slots)
    call_custom = ir.ExprStmt(ir.Call("clad::custom_derivatives::" + cfn.name, custom_args,
                                      ir.VOID))
    primal = ir.Call(fn.name, tuple(map(_arg, fn.params)), fn.ret, True)
    ret_primal = ir.Return(primal) if fn.ret.base != "void" else ir.ExprStmt(primal)
    out = pullback_and_grad(fn.name, fn, sig, [ir.ExprStmt(primal), call_custom],
                            "custom derivative: " + cfn.name) + \
        split_pair(fn.name, fn, sig, [ret_primal], [call_custom])
    afn = module.customs.get(names.pullback_assign(fn.name))
    if afn is not None:
        # the assigning sweep (names.PULLBACK_ASSIGN): the split sweep's signature, calling it
        if len(afn.params) != len(cfn.params):
            raise DiffError(afn.loc, f"custom derivative '{afn.name}' takes {len(afn.params)} "
                                     f"parameters; expected {len(cfn.params)}, as "
                                     f"'{cfn.name}'")
        call_assign = ir.ExprStmt(ir.Call("clad::custom_derivatives::" + afn.name, custom_args,
                                          ir.VOID))
        out.append(_function(names.reverse_sweep_assign(fn.name), ir.VOID,
                             sig.params + sig.seed + sig.adjoints + [TAPE_PARAM],
                             [call_assign], fn.template))
    return Generated(tuple((n, t) for n, t, _ in out), False,
                     functions=tuple(f for _, _, f in out))


def uses_tape(stmts) -> bool:
    """Whether generated statements use the tape (the combined pullback then declares it)."""
    for s in stmts:
        if names.TAPE in ir.stmt_names(s):
            return True
        for x in ir.walk_stmts(s):
            if isinstance(x, (ir.TapePush, ir.TapeArray)) or any(
                    isinstance(y, ir.TapePop) for e in ir.stmt_exprs(x) for y in ir.walk_expr(e)):
                return True
    return False


def writes_primal(fn: ir.Function, body, adjoint_roots: set, sweep_writes: Mapping) -> bool:
    """May the generated sweep `body` of fn write memory other than adjoints and its own
    local arrays: memory behind fn's pointer parameters, through a pointer derived from
    one or from the tape, or in a callee's sweep given such a pointer? True when unsure."""
    locals_ = {x.var.name for s in body for x in ir.walk_stmts(s)
               if isinstance(x, (ir.Decl, ir.VectorDecl)) and
               (x.var.type.is_array or x.var.type.vector)}
    safe = set().union(*derived_pointers(body, set(adjoint_roots) | locals_).values())
    unsafe = set().union(*derived_pointers(body, {p.name for p in fn.params
                                                  if p.type.is_pointer}).values())

    def writable(name: str) -> bool:     # may name primal memory
        return name not in safe or name in unsafe

    def writable_arg(a) -> bool:
        r = ir.root_var(a) if a.type.is_pointer else None
        return a.type.is_pointer and (r is None or writable(r.name))

    for s in body:
        for x in ir.walk_stmts(s):
            if isinstance(x, ir.Assign) and not isinstance(x.target, ir.Var):
                r = ir.root_var(x.target)
                if r is None or writable(r.name):
                    return True
            elif isinstance(x, ir.TapeArray) and x.pop and writable(x.var.name):
                return True
            elif not isinstance(x, MODELED) and ir.stmt_names(x) & unsafe:
                return True       # spelled verbatim: may write what it names
            calls = [c for e in ir.stmt_exprs(x) for c in ir.walk_expr(e)
                     if isinstance(c, ir.Call) and _may_write_args(c, sweep_writes)]
            if any(writable_arg(a) for c in calls for a in c.args):
                return True
    return False


def _may_write_args(call: ir.Call, sweep_writes: Mapping) -> bool:
    """Whether a call in a sweep may write through the pointers it is given: a user function,
    a callee's forward, a callee's sweep that may write primal memory; not math, runtime
    helpers or custom pullbacks."""
    split = names.split_generated(ir.call_name(call.fn))
    if split is not None and split[1] == "reverse_sweep":
        return sweep_writes.get(ir.call_name(call.fn), True)
    return call.user or (split is not None and split[1] == "reverse_forw")


def overlapping(module: ir.Module, fn: ir.Function) -> list:
    """Groups of fn's pointer parameters whose memory may overlap: some call site passes them
    pointers into one array. Not grouped: slices of a `TORCHCLAD_WRITE_ONCE` buffer of the
    caller (the promise includes that slices passed to one call do not overlap), and
    parameters fn only reads (their adjoints are only added into, in any order). A group
    [every pointer parameter] when the engine cannot tell."""
    writes = written_params(fn)
    pointers = [i for i, p in enumerate(fn.params) if p.type.is_pointer]
    groups = []
    for caller in module.functions.values():
        calls = [x for s in ir.walk_stmts(caller.body) for e in ir.stmt_exprs(s)
                 for x in ir.walk_expr(e)
                 if isinstance(x, ir.Call) and x.user and ir.function_key(x.fn) == fn.name]
        if not calls:
            continue
        try:
            al = activity_mod.find_aliases(caller, module.globals, module)
        except DiffError:
            return [{fn.params[i].name for i in pointers}]
        for call in calls:
            by_root: dict = {}
            for i, a in enumerate(call.args):
                if not a.type.is_memory or ir.is_null(a) or i >= len(fn.params):
                    continue
                r = al.root_of(a)
                if r is None:
                    return [{fn.params[i].name for i in pointers}]
                by_root.setdefault(r.uid, []).append(i)
            for uid, idx in by_root.items():
                if len(idx) < 2 or uid in caller.write_once:
                    continue
                if not any(i in writes or not fn.params[i].type.const for i in idx):
                    continue
                groups.append({fn.params[i].name for i in idx})
    return groups


def promotion(module: ir.Module, fn: ir.Function, roots: set):
    """The passes that assume fn's adjoint roots do not overlap (loop distribution, loop
    interchange, scalar promotion, then forward-order reverse loops) for fn's generated code,
    or the identity when some of fn's pointer parameters may overlap (`overlapping`)."""
    if overlapping(module, fn):
        return lambda stmts: stmts
    return lambda stmts: forward_order(promote_accumulations(
        interchange(fission(stmts, roots), roots), roots), roots)
