"""The lowerer's state and the jobs every part of it shares: locations and errors, C++ types,
names and scopes, side effects pulled out of expressions.

Names: every declaration gets a name that is unique where it is visible. A local that
shadows a visible name, or a user identifier that could collide with generated names
(anything starting with '_'), is renamed deterministically.
"""
from __future__ import annotations

import re

import clang.cindex as ci

from .. import ir
from ..errors import DiffError, Loc
from .parse import loc_of

K = ci.CursorKind
TK = ci.TypeKind

FLOAT_KINDS = {TK.FLOAT, TK.DOUBLE, TK.LONGDOUBLE}
ASSIGN_OPS = {"=", "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "|=", "^="}
_QUALIFIERS = re.compile(r"\bconst\b|\bvolatile\b|\brestrict\b|__restrict__|__restrict")


def unwrapped(c):
    """Expression cursor c under the implicit wrappers clang puts around it (UNEXPOSED_EXPR
    for an implicit cast, PAREN_EXPR) that have one expression inside."""
    while c is not None and c.kind in (K.UNEXPOSED_EXPR, K.PAREN_EXPR):
        inner = [x for x in c.get_children() if x.kind.is_expression()]
        if len(inner) != 1:
            break
        c = inner[0]
    return c


class Scopes:
    """State of lowering one function: scopes of declared names, pragmas, pending effects."""

    def __init__(self, filename: str, template: tuple, module_fns: dict):
        self.filename = filename
        self.template = template
        self.module_fns = module_fns
        self.scopes: list[dict] = []          # decl key -> ir.Var
        self.visible: list[set] = []
        self.used_names: set = set()
        self.uid = 0
        self.globals: dict = {}
        #: uid of a namespace-scope integer constant initialised with a literal -> that literal;
        #: a function reading one reads a local copy of it instead (constant_copy)
        self.global_constants: dict = {}
        self.constant_copies: dict = {}   # uid of the global -> its local copy (ir.Var)
        self.pre: list | None = None      # side effects pulled out of the expression at hand
        self.pragmas: dict = {}           # line -> pragma text (omp / torchclad)
        self.n_inc = 0
        self.n_ref = 0                    # temporaries bound to reference parameters
        self.n_temps: dict = {}           # prefix -> count of the lowering's temporaries
        self.this_obj = None              # the object whose implicit members are read
        self.nondiff_vars: set = set()    # uids of memory marked non_differentiable
        self.ret_type = None              # the function's result type
        self.lvalue_wanted = False        # the next expression lowered is assigned to
        self.as_lvalue = False            # the expression being lowered is assigned to
        self.value_temps: set = set()     # uids of the copies `?:` with side effects yields
        self.record_decls: dict = {}      # struct name -> its declaration cursor
        self.used_pragmas: set = set()   # lines of the pragmas a for loop took
        self.pragma_owner: dict = {}     # line -> offset of the first for statement on it

    def visitor(self, c):
        """The method lowering cursor ``c``, ``visit_<its kind>`` (``visit_if_stmt``,
        ``visit_call_expr``, ...), or None."""
        return getattr(self, "visit_" + c.kind.name.lower(), None)

    # ------------------------------------------------------------------ locations
    def loc(self, c) -> Loc:
        return loc_of(c, self.filename)

    def err(self, c, msg: str):
        raise DiffError(self.loc(c), msg)

    # ------------------------------------------------------------------ types
    def type_of(self, t, c=None, allow_ref: bool = False) -> ir.Type:
        """The IR type of libclang type ``t``; with the declaring cursor ``c``, C++ types the
        engine does not take (pointers to pointers, structs, VLAs; references unless
        ``allow_ref``: parameters and locals) are errors. A reference `T&` is held as the
        address it binds (ptr 1, ref)."""
        ref = t.kind in (TK.LVALUEREFERENCE, TK.RVALUEREFERENCE)
        if ref:
            if c is not None and not allow_ref:
                self.err(c, "a reference here is not supported; use a value or a pointer")
            t = t.get_pointee()
        t, ptr, dims = self.strip_declarators(t, c)
        if ref and (ptr or dims) and c is not None:
            self.err(c, "a reference to a pointer or an array is not supported; pass the "
                        "pointer by value")
        if ptr > 1 and c is not None:
            self.err(c, "pointers to pointers are not supported; pass flat arrays")
        const = t.is_const_qualified()
        spelling = re.sub(r"\s+", " ", _QUALIFIERS.sub("", t.spelling).strip())
        canon = t.get_canonical()
        real = canon.kind in FLOAT_KINDS or spelling in self.template
        if canon.kind == TK.RECORD:
            rt = self.record_type(canon, c, spelling, ptr, dims, const)
            self.record_decls.setdefault(rt.base, canon.get_declaration())
            return ir.Type(rt.base, 1 if ref else ptr, const, () if ref else rt.dims, rt.real,
                           ref=ref, record=True, fields=rt.fields)
        if ref:
            return ir.Type(spelling, 1, const, (), real, ref=True)
        return ir.Type(spelling, ptr, const, tuple(dims), real)

    def strip_declarators(self, t, c):
        """``(element type, pointer depth, fixed array dims)`` of ``t``."""
        ptr, dims = 0, []
        while True:
            k = t.kind
            if k == TK.POINTER:
                ptr += 1
                t = t.get_pointee()
            elif k == TK.CONSTANTARRAY:
                dims.append(str(t.element_count))
                t = t.element_type
            elif k in (TK.INCOMPLETEARRAY, TK.DEPENDENTSIZEDARRAY, TK.VARIABLEARRAY):
                if k == TK.VARIABLEARRAY and c is not None and c.kind == K.VAR_DECL:
                    self.err(c, "variable-length arrays are not supported; use a fixed size "
                                "or a buffer passed in")
                ptr += 1
                t = t.element_type
            elif k in (TK.LVALUEREFERENCE, TK.RVALUEREFERENCE):
                t = t.get_pointee()
            elif k == TK.ELABORATED and t.get_named_type().kind in (
                    TK.POINTER, TK.CONSTANTARRAY, TK.INCOMPLETEARRAY):
                t = t.get_named_type()
            else:
                return t, ptr, dims

    def bin_type(self, op, l, r, c) -> ir.Type:
        """The type of ``l op r`` (usual arithmetic conversions, pointer arithmetic)."""
        if op in ("<", ">", "<=", ">=", "==", "!=", "&&", "||"):
            return ir.BOOL
        if l.type.is_memory and op in ("+", "-"):
            if r.type.is_memory:
                return ir.Type("ptrdiff_t")
            t = l.type
            return ir.Type(t.base, t.ptr + (1 if t.dims else 0), t.const, (), t.real)
        if r.type.is_memory and op == "+":
            t = r.type
            return ir.Type(t.base, t.ptr + (1 if t.dims else 0), t.const, (), t.real)
        if l.type.real or r.type.real:
            cands = [x.type for x in (l, r) if x.type.real]
            for cand in cands:
                if cand.base in self.template:
                    return ir.Type(cand.base, real=True)
            order = {"float": 0, "double": 1, "long double": 2}
            best = max(cands, key=lambda t: order.get(t.base, 1))
            if c.type.kind in FLOAT_KINDS:
                return ir.Type(c.type.spelling, real=True)
            return ir.Type(best.base, real=True)
        return ir.Type(l.type.base if l.type.base != "bool" else "int")

    # ------------------------------------------------------------------ names
    def new_var(self, c, name: str, typ: ir.Type) -> ir.Var:
        visible = set().union(*self.visible) if self.visible else set()
        new = name
        if name.startswith("_") or name in visible or name in self.template:
            base = name.lstrip("_") or "v"
            base = base if not name.startswith("_") else base + "_u"
            new, k = base, 1
            while new in self.used_names or new in visible:
                new = f"{base}_{k}"
                k += 1
        self.used_names.add(new)
        self.uid += 1
        v = ir.Var(new, typ, self.uid)
        key = (c.location.line, c.location.column, c.spelling)
        self.scopes[-1][key] = v
        self.visible[-1].add(new)
        return v

    def lookup(self, c) -> ir.Var | None:
        ref = c.referenced
        if ref is None:
            return None
        key = (ref.location.line, ref.location.column, ref.spelling)
        for s in reversed(self.scopes):
            if key in s:
                return s[key]
        g = self.globals.get(ref.spelling) if ref.kind == K.VAR_DECL else None
        if g is not None and g.uid in self.global_constants and g.name not in self.used_names:
            return self.constant_copy(g)
        return g

    def constant_copy(self, g: ir.Var) -> ir.Var:
        """The function's local copy of the global integer constant g (`const int UNROLL = 8;`
        at namespace scope), declared at the top of its body (constant_decls): the analyses
        then read its value as they read a local constant's (a loop step, a trip count), and
        the generated code still spells its name."""
        v = self.constant_copies.get(g.uid)
        if v is None:
            self.uid += 1
            v = self.constant_copies[g.uid] = ir.Var(g.name, g.type, self.uid)
        return v

    def constant_decls(self) -> tuple:
        """The declarations of the local copies constant_copy made, in the order first read."""
        return tuple(ir.Decl(v, self.global_constants[u]) for u, v in self.constant_copies.items())

    def push(self):
        self.scopes.append({})
        self.visible.append(set())

    def pop(self):
        self.scopes.pop()
        self.visible.pop()

    # ------------------------------------------------------------------ non_differentiable
    @staticmethod
    def nondiff(c) -> bool:
        """Whether declaration c (or the class it belongs to, or the class of its type)
        carries Clad's `non_differentiable` attribute."""
        def marked(x):
            return x is not None and any(a.kind == K.ANNOTATE_ATTR and
                                         a.spelling == "non_differentiable"
                                         for a in x.get_children())
        if c is None:
            return False
        if marked(c):
            return True
        if c.kind in (K.CXX_METHOD, K.FIELD_DECL) and marked(c.semantic_parent):
            return True
        t = c.type.get_canonical() if c.kind in (K.VAR_DECL, K.PARM_DECL) else None
        while t is not None and t.kind in (TK.POINTER, TK.LVALUEREFERENCE, TK.RVALUEREFERENCE):
            t = t.get_pointee().get_canonical()
        return t is not None and t.kind == TK.RECORD and marked(t.get_declaration())

    @staticmethod
    def detached(e) -> ir.Expr:
        """e with no derivative (Clad's non_differentiable): `torchclad::detach(e)`."""
        return ir.Call("torchclad::detach", (e,), e.type)

    @staticmethod
    def undetached(e) -> ir.Expr:
        if isinstance(e, ir.Call) and e.fn == "torchclad::detach" and len(e.args) == 1:
            return e.args[0]
        return e

    # ------------------------------------------------------------------ side effects
    def effects(self, thunk):
        """Lower with side effects (x[i++], --n > 0) allowed; returns (pre, value)."""
        saved, self.pre = self.pre, []
        try:
            value = thunk()
            return self.pre, value
        finally:
            self.pre = saved
