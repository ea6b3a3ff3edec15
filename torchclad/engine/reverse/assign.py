"""The assigning variant of an elementwise reverse sweep (`f_reverse_sweep_assign`).

A reverse sweep follows Clad's contract: it adds into the input adjoints (the caller zeroes
them) and resets each seed element as it reads it. For an elementwise kernel,

    for (int i = 0; i < N; i++) { T x = inp[i]; out[i] = g(x); }

that contract costs two memory passes the derivative does not need: the zero fill (or the
read of a zeroed buffer) of d inp, and the write of zeros into d out. This module derives,
from the generated sweep, the variant that *assigns* each element of an input adjoint and
only *reads* the seeds (torchclad's extension; a custom derivative spells it
`f_pullback_assign`, see generate.generate_custom):

    for (int i = 0; i < N; ++i) { T x = inp[i]; T _r_d0 = _d_out[i]; _d_inp[i] = <d x>; }

It is derived only where the sweep shows, statement by statement, that the two agree:

- the primal is one loop `for (int i = 0; i < N; i++)` (N an int parameter it never assigns),
  with straight-line code in it (no nested loop, branch, jump or call of a user function);
  each output element is written once, `out[i] = ...` at the body's top level, and the output
  is never read; each input with an adjoint is a pointer the function never writes;
- the sweep is the same loop, straight-line; each input adjoint appears exactly once, as the
  target of `_d_inp[i] += v` at the body's top level (v not reading it), and each seed only as
  reads `_d_out[i]` and resets `_d_out[i] = 0`.

Then iteration i adds into element i of each input adjoint exactly once and touches no other
element: `_d_inp[i] = v` gives the same result on a zeroed buffer, and on any buffer of
exactly N elements (every element is written). The bridge passes an uninitialised buffer only
when the adjoint has N elements (`extents`: the parameter N per assigned adjoint), else a
zeroed one. Without its resets the sweep never writes a seed, which the bridge then passes as
the caller's grad, uncopied. Anything else gets no variant: the accumulating sweep runs.

A copy. Where the value assigned is the seed element itself, unconverted -- `_d_inp[i] =
_d_out[i]`, through a local initialised with it or not (a residual connection: out = a + b) --
the variant copies N elements of that seed into that input adjoint (`copies`: input
adjoint uid -> seed uid; `Derivative.assign_copies`). A caller whose input, output and N all
have one number of elements may take the grad itself as that input's gradient, without
running anything (as torch's own add backward hands its grad on).
"""
from __future__ import annotations

from dataclasses import replace

from .. import ir


class _NoVariant(Exception):
    pass


def _body(stmts) -> list:
    return [s for s in stmts if not isinstance(s, ir.Comment)]


def _counted_loop(stmts, int_params: dict) -> "tuple[ir.Loop, str, str]":
    """The single loop `for (int i = 0; i < N; i += 1)` of a body: (loop, i, N)."""
    body = _body(stmts)
    if len(body) != 1 or not isinstance(body[0], ir.Loop) or body[0].do_while:
        raise _NoVariant
    loop = body[0]
    if len(loop.init) != 1 or len(loop.inc) != 1:
        raise _NoVariant
    d, cond, inc = loop.init[0], loop.cond, loop.inc[0]
    if not (isinstance(d, ir.Decl) and isinstance(d.init, ir.Const) and d.init.text == "0"
            and not d.var.type.real and not d.var.type.is_pointer):
        raise _NoVariant
    i = d.var.name
    if not (isinstance(cond, ir.Binary) and cond.op == "<" and isinstance(cond.lhs, ir.Var)
            and cond.lhs.name == i and isinstance(cond.rhs, ir.Var)
            and cond.rhs.name in int_params):
        raise _NoVariant
    if not (isinstance(inc, ir.Assign) and inc.op == "+=" and isinstance(inc.target, ir.Var)
            and inc.target.name == i and isinstance(inc.value, ir.Const)
            and inc.value.text == "1"):
        raise _NoVariant
    for s in ir.walk_stmts(loop.body):
        if not isinstance(s, (ir.Decl, ir.Assign, ir.Block, ir.Comment)):
            raise _NoVariant          # a nested loop, a branch, a jump, a tape operation ...
        if isinstance(s, ir.Assign) and isinstance(s.target, ir.Var) and s.target.name == i:
            raise _NoVariant
        for e in ir.stmt_exprs(s):
            for x in ir.walk_expr(e):
                if (isinstance(x, ir.Call) and x.user) or \
                        (isinstance(x, ir.Unary) and x.op == "&"):
                    raise _NoVariant  # a user call, an address that could be written through
    return loop, i, cond.rhs.name


def _at_counter(e, name: str, i: str) -> bool:
    """e is `name[i]`."""
    return (isinstance(e, ir.Index) and isinstance(e.base, ir.Var) and e.base.name == name
            and isinstance(e.index, ir.Var) and e.index.name == i)


def _mentions(stmts, name: str) -> int:
    n = 0
    for s in stmts:
        for x in ir.walk_stmts(s):
            for e in ir.stmt_exprs(x):
                n += sum(1 for y in ir.walk_expr(e) if isinstance(y, ir.Var) and y.name == name)
    return n


def elementwise_assign(fn: ir.Function, sweep: list, adjoints: tuple, written: set,
                       adj_names: dict) -> "tuple[list, dict, dict] | None":
    """(the assigning sweep's body, {input param uid: extent param uid}, {input param uid:
    seed param uid} of the adjoints it assigns a copy of a seed) for an elementwise kernel's
    generated `sweep` (see the module docstring), or None. adjoints: the parameters with an
    adjoint buffer; written: indices of the parameters fn writes."""
    try:
        return _derive(fn, sweep, adjoints, written, adj_names)
    except _NoVariant:
        return None


def _derive(fn, sweep, adjoints, written, adj_names):
    assigned = {s.target.uid for s in ir.walk_stmts(fn.body)
                if isinstance(s, ir.Assign) and isinstance(s.target, ir.Var)}
    int_params = {p.name: p for p in fn.params
                  if not p.type.real and not p.type.is_pointer and not p.type.ref
                  and p.uid not in assigned}
    loop, i, n = _counted_loop(fn.body.stmts, int_params)
    top = _body(loop.body.stmts)
    index = {p.uid: k for k, p in enumerate(fn.params)}
    seeds = [p for p in adjoints if index.get(p.uid) in written]
    inputs = [p for p in adjoints if p not in seeds]
    if not inputs or any(not p.type.is_pointer or not p.type.const for p in inputs):
        raise _NoVariant
    for o in seeds:
        # written once per element (one top-level `o[i] = ...`), never read
        stores = [s for s in top if isinstance(s, ir.Assign) and _at_counter(s.target, o.name, i)]
        if len(stores) != 1 or stores[0].op != "=" or _mentions([loop], o.name) != 1:
            raise _NoVariant
    sloop, si, sn = _counted_loop(sweep, int_params)
    if sn != n:
        raise _NoVariant
    stmts = list(_body(sloop.body.stmts))
    for p in inputs:
        d = adj_names[p.uid]
        hits = [k for k, s in enumerate(stmts) if isinstance(s, ir.Assign) and s.op == "+="
                and _at_counter(s.target, d, si)]
        if len(hits) != 1 or _mentions(stmts, d) != 1:
            raise _NoVariant
        stmts[hits[0]] = replace(stmts[hits[0]], op="=")
    for o in seeds:
        d = adj_names[o.uid]
        resets = [k for k, s in enumerate(stmts) if isinstance(s, ir.Assign) and s.op == "="
                  and _at_counter(s.target, d, si) and isinstance(s.value, ir.Const)
                  and s.value.text == "0"]
        if resets and _mentions(stmts[resets[0] + 1:], d):
            raise _NoVariant           # read after its reset: that read sees 0, not the seed
        stmts = [s for k, s in enumerate(stmts) if k not in resets]
        for s in stmts:
            for x in ir.walk_stmts(s):
                if isinstance(x, ir.Assign) and isinstance(x.target, (ir.Index, ir.Unary)) and \
                        ir.root_var(x.target) is not None and ir.root_var(x.target).name == d:
                    raise _NoVariant       # the sweep still writes the seed
        # every remaining mention is a read d[i]
        for s in stmts:
            for x in ir.walk_stmts(s):
                for e in ir.stmt_exprs(x):
                    reads = [y for y in ir.walk_expr(e) if _at_counter(y, d, si)]
                    names = [y for y in ir.walk_expr(e) if isinstance(y, ir.Var) and y.name == d]
                    if len(names) != len(reads):
                        raise _NoVariant
    new = replace(sloop, body=ir.Block(tuple(stmts), sloop.body.loc))
    copies = {}
    for p in inputs:
        o = _copied_seed(stmts, adj_names[p.uid], si, seeds, adj_names)
        if o is not None and o.type.base == p.type.base:
            copies[p.uid] = o.uid
    return [new], {p.uid: int_params[n].uid for p in inputs}, copies


def _copied_seed(stmts, d: str, i: str, seeds, adj_names):
    """The seed whose element i the statement `d[i] = v` among stmts assigns as it is (v is
    `_d_out[i]`, or a local declared with that value and never assigned), else None."""
    store = next(s for s in stmts if isinstance(s, ir.Assign) and _at_counter(s.target, d, i))
    v = store.value
    base = v.type.base  # no conversion on the way: one scalar type throughout
    if isinstance(v, ir.Var):
        decls = [s for s in stmts if isinstance(s, ir.Decl) and s.var.name == v.name]
        assigned = any(isinstance(x, ir.Assign) and isinstance(x.target, ir.Var)
                       and x.target.name == v.name for s in stmts for x in ir.walk_stmts(s))
        if len(decls) != 1 or decls[0].init is None or assigned:
            return None
        v = decls[0].init
    for o in seeds:
        if _at_counter(v, adj_names[o.uid], i) and v.type.base == base == o.type.base:
            return o
    return None
