"""Activity analysis: which objects carry a derivative.

Objects are keyed ('var', uid) for scalars and pointer variables, ('mem', uid) for the
memory behind a pointer parameter or a local array. A pointer local aliases the memory of
its root (`const float* x = inp + off` reads and writes ('mem', inp)); the memory behind
`&y` for a scalar local y is y itself.

active = varied (depends on a wrt input) ∩ useful (reaches an output) ∩ floating.
Flow-insensitive, so it is conservative: an object active anywhere is active everywhere.
With analyses off every floating object is active (wrt params and outputs only, among the
parameters, since only those have adjoint buffers).
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import ir
from ..errors import DiffError
from ..rules import math as rules
from .effects import call_root, global_effects


@dataclass(frozen=True)
class Aliases:
    """Pointer variables and the root object each one points into."""
    roots: dict            # pointer var uid -> root ir.Var (param, local array or scalar)
    vars: dict             # uid -> ir.Var for every variable of the function

    def root_of(self, e) -> "ir.Var | None":
        r = ir.root_var(e)
        if r is None:
            return None
        return self.roots.get(r.uid, r)

    def mem_key(self, root: ir.Var) -> tuple:
        if root.type.is_memory:
            return ("mem", root.uid)
        return ("var", root.uid)


def find_aliases(fn: ir.Function, globals_: dict, module: "ir.Module | None" = None) -> Aliases:
    vars_ = {v.uid: v for v in fn.params}
    for g in globals_.values():
        vars_[g.var.uid] = g.var
    for s in ir.walk_stmts(fn.body):
        if isinstance(s, ir.Decl):
            vars_[s.var.uid] = s.var
    roots: dict = {}
    for v in vars_.values():
        if v.type.is_memory:
            roots[v.uid] = v
    changed = True
    assigns: list = []
    for s in ir.walk_stmts(fn.body):
        if isinstance(s, ir.Decl) and s.var.type.is_pointer and s.init is not None:
            assigns.append((s.var, s.init, s.loc))
        elif isinstance(s, ir.Assign) and isinstance(s.target, ir.Var) and \
                s.target.type.is_pointer:
            assigns.append((s.target, s.value, s.loc))
    candidates: dict = {}             # pointer var uid -> {root uid: root Var}

    def resolve(r: ir.Var) -> list:
        if r.uid in candidates:
            return list(candidates[r.uid].values())
        return [roots.get(r.uid, r)]

    while changed:
        changed = False
        for v, e, loc in assigns:
            e = call_root(module, e) if module is not None and call_root(module, e) is not None \
                else e               # p = f(a): f returns a pointer into a
            r = ir.root_var(e)
            if r is None:
                if isinstance(e, ir.Const) or ir.is_null(e):
                    continue            # nullptr
                raise DiffError(loc, f"cannot tell which array pointer '{v.name}' points into; "
                                     "point it at a parameter or local array plus an offset")
            got = candidates.setdefault(v.uid, {})
            for root in resolve(r):
                if root.uid != v.uid and root.uid not in got:
                    got[root.uid] = root
                    changed = True
    for uid, cands in candidates.items():
        if len(cands) > 1:
            v = vars_[uid]
            names = ", ".join(sorted(c.name for c in cands.values()))
            raise DiffError(fn.loc, f"pointer '{v.name}' points into several arrays "
                                    f"({names}); use one pointer per array")
        if cands:
            roots[uid] = next(iter(cands.values()))
    # params and arrays are their own roots; a pointer param reassigned keeps itself
    return Aliases(roots, vars_)


def _differentiable_nodes(e):
    """The nodes of e, without the arguments of calls whose derivative is zero everywhere
    (floor, round, torchclad::detach, ...): nothing flows back through them."""
    stack = [e]
    while stack:
        x = stack.pop()
        yield x
        if isinstance(x, ir.Call) and not x.user:
            rule = rules.lookup(ir.call_name(x.fn))
            if rule is not None and rule.zero:
                continue
        stack.extend(reversed(ir.children(x)))


def reads_of(e, al: Aliases) -> set:
    """Floating objects whose value an expression reads through a differentiable path."""
    out = set()
    for x in _differentiable_nodes(e):
        if isinstance(x, ir.Var) and x.type.real and not x.type.is_memory:
            out.add(("var", x.uid))
        elif isinstance(x, (ir.Index, ir.Member)) and x.type.real:
            r = al.root_of(x.base)
            if r is not None:
                out.add(al.mem_key(r))
        elif isinstance(x, ir.Unary) and x.op == "*" and x.type.real:
            r = al.root_of(x.operand)
            if r is not None:
                out.add(al.mem_key(r))
        elif isinstance(x, ir.Call) and x.user:
            for a in x.args:              # the callee may read the arrays it is given
                if a.type.is_memory and a.type.real:
                    r = al.root_of(a)
                    if r is not None:
                        out.add(al.mem_key(r))
    return out


def target_key(t, al: Aliases) -> "tuple | None":
    if isinstance(t, ir.Var):
        return ("var", t.uid)
    r = al.root_of(t)
    return al.mem_key(r) if r is not None else None


@dataclass(frozen=True)
class Activity:
    active: frozenset      # object keys
    varied: frozenset
    useful: frozenset
    aliases: Aliases
    globals: frozenset = frozenset()   # keys of the non-const floating globals it touches

    def is_active(self, key) -> bool:
        return key in self.active

    def mem_key_of(self, v: ir.Var) -> tuple:
        return self.aliases.mem_key(v)

    def var_active(self, v: ir.Var) -> bool:
        if v.type.is_memory:
            return ("mem", v.uid) in self.active
        return ("var", v.uid) in self.active

    def expr_active(self, e) -> bool:
        """Whether a floating expression depends on an active object."""
        if not e.type.real or e.type.is_pointer:
            return False
        return bool(reads_of(e, self.aliases) & self.active)

    def dump(self) -> str:
        names = {}
        for v in self.aliases.vars.values():
            names[("var", v.uid)] = v.name
            names[("mem", v.uid)] = v.name + "[]"
        fmt = lambda s: ", ".join(sorted(names.get(k, str(k)) for k in s))
        return (f"varied: {fmt(self.varied)}\nuseful: {fmt(self.useful)}\n"
                f"active: {fmt(self.active)}")


def analyze(fn: ir.Function, module: ir.Module, wrt: tuple, outputs: tuple,
            callee_effects, enabled: bool = True) -> Activity:
    """wrt / outputs: parameter Vars. callee_effects(call) -> set of param indices written."""
    al = find_aliases(fn, module.globals, module)
    edges: list = []

    def globals_of(call):
        callee = module.functions.get(ir.function_key(call.fn))
        return global_effects(module, callee) if callee is not None else ((), ())

    def add(target, sources):
        if target is not None:
            edges.append((target, frozenset(sources)))

    ret_sources: set = set()
    for s in ir.walk_stmts(fn.body):
        if isinstance(s, ir.Decl):
            if s.var.type.is_memory and s.init_list:
                add(("mem", s.var.uid), set().union(*[reads_of(e, al) for e in s.init_list]))
            elif s.init is not None and s.var.type.real and not s.var.type.is_pointer:
                add(("var", s.var.uid), reads_of(s.init, al))
            if s.init is not None:
                _call_edges(s.init, al, add, callee_effects, globals_of)
        elif isinstance(s, ir.Assign):
            tk = target_key(s.target, al)
            if s.target.type.real and tk is not None:
                src = reads_of(s.value, al)
                if s.op != "=":
                    src |= {tk}
                add(tk, src)
            _call_edges(s.value, al, add, callee_effects, globals_of)
        elif isinstance(s, ir.ExprStmt):
            _call_edges(s.expr, al, add, callee_effects, globals_of)
        elif isinstance(s, ir.Return) and s.value is not None and fn.ret.is_real_scalar:
            ret_sources |= reads_of(s.value, al)

    wrt_keys = {al.mem_key(p) for p in wrt}
    out_keys = {al.mem_key(p) for p in outputs}
    all_real = set()
    for v in al.vars.values():
        if v.uid > 0 and v.type.real:
            all_real.add(al.mem_key(v))
    # a non-const global fn (or a callee) touches carries derivatives in and out of it
    # like a parameter that is both an input and an output
    gread, gwritten = global_effects(module, fn)
    global_keys = {al.mem_key(al.vars[u]) for u in gread | gwritten
                   if u in al.vars and al.vars[u].type.real}
    all_real |= global_keys
    param_keys = {al.mem_key(p) for p in fn.params}

    varied = set(wrt_keys) | global_keys
    changed = True
    while changed:
        changed = False
        for t, src in edges:
            if t not in varied and src & varied:
                varied.add(t)
                changed = True
    useful = set(out_keys) | ret_sources | global_keys
    changed = True
    while changed:
        changed = False
        for t, src in edges:
            if t in useful and not src <= useful:
                useful |= src
                changed = True
    if enabled:
        active = varied & useful & all_real
    else:
        # scalar parameters the body overwrites: their adjoints are local ones
        assigned = {t for t, _ in edges if t[0] == "var" and t in param_keys}
        active = (all_real - param_keys) | wrt_keys | out_keys | (assigned & all_real)
    return Activity(frozenset(active), frozenset(varied), frozenset(useful), al,
                    frozenset(global_keys))


def _call_edges(e, al, add, callee_effects, globals_of=None):
    """A user call writes through some pointer args (and the globals it writes): those
    objects depend on every arg and every global it reads."""
    for x in ir.walk_expr(e):
        if isinstance(x, ir.Call) and x.user:
            written = callee_effects(x)
            src = set()
            gread, gwritten = globals_of(x) if globals_of is not None else ((), ())
            src |= {al.mem_key(al.vars[u]) for u in gread if u in al.vars}
            for u in gwritten:
                if u in al.vars:
                    add(al.mem_key(al.vars[u]), src)
            for a in x.args:
                src |= reads_of(a, al)
                if a.type.is_memory and a.type.real:
                    r = al.root_of(a)
                    if r is not None:
                        src.add(al.mem_key(r))
            for i in written:
                r = al.root_of(x.args[i])
                if r is not None:
                    add(al.mem_key(r), src)
