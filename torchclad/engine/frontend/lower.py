"""Lower libclang cursors into the engine's IR, then let the cursors go.

:func:`lower_source` parses a source and lowers each function defined in it with a
:class:`Lowerer`: statements (:mod:`.statements`) and expressions (:mod:`.expressions`) over
shared state, names and types (:mod:`.scope`).
"""
from __future__ import annotations

import re

from .. import ir, names
from ..errors import DiffError, Loc
from . import fence
from .expressions import Expressions
from .literals import literal
from .records import Records
from .parse import loc_of, parse, pragmas
from .scope import K, unwrapped
from .statements import Statements


class Lowerer(Statements, Expressions, Records):
    """Lowers one function (or the globals of a module) of one source."""

    def function(self, c, custom=False) -> ir.Function:
        fence.check(c, self.filename)
        for ch in c.walk_preorder():
            if ch.kind in (K.VAR_DECL, K.PARM_DECL):
                self.used_names.add(ch.spelling)
        self.push()
        params = []
        if c.kind == K.CXX_METHOD:           # the object is the first parameter: _this
            cls = self.type_of(c.semantic_parent.type, c)
            obj = ir.Type(cls.base, 0, c.is_const_method(), (), cls.real, record=True,
                          fields=cls.fields)
            this = ir.Var(names.THIS, obj.pointer_to(), self.uid + 1)
            self.uid += 1
            params.append(this)
            self.this_obj = ir.Unary("*", this, obj)
        for ch in c.get_children():
            if ch.kind == K.PARM_DECL:
                if not ch.spelling:
                    self.err(ch, "unnamed parameters are not supported")
                params.append(self.new_var(ch, ch.spelling,
                                           self.type_of(ch.type, ch, allow_ref=True)))
        ret = self.type_of(c.result_type, c, allow_ref=True)
        if ret.is_object:
            self.err(c, f"'{c.spelling}' returns a struct; return a number and write the "
                        "struct through a reference or pointer parameter")
        # a pointer or a reference returned points into memory a parameter gives; the caller
        # sees it as a pointer into that argument (effects.returned_param)
        self.ret_type = ret
        body = None
        for ch in c.get_children():
            if ch.kind == K.COMPOUND_STMT:
                body = self.block(ch)
        self.pop()
        self.check_pragmas_used(c)
        if body is not None and self.constant_copies:
            body = ir.Block(self.constant_decls() + body.stmts, body.loc)
        if body is None:
            self.err(c, f"'{c.spelling}' has no body in this source; define it here or give it "
                        "a custom derivative in namespace clad::custom_derivatives")
        for s in ir.walk_stmts(body):
            r = ir.root_var(s.target) if isinstance(s, ir.Assign) else None
            if r is not None and r in params and r.type.is_object:
                self.err(c, f"parameter '{r.name}' (a struct passed by value) is written; pass "
                            "it by reference, or copy it into a local first")
        names_ = tuple(ch.spelling for ch in c.get_children() if ch.kind == K.PARM_DECL)
        if c.kind == K.CXX_METHOD:
            names_ = (names.THIS,) + names_
        return ir.Function(function_name(c), tuple(params), ret, body, self.template,
                           self.loc(c), custom, names_,
                           self.write_once(c, params[-len(names_):] if names_ else []))

    def check_pragmas_used(self, c) -> None:
        """Every torchclad pragma and OpenMP loop pragma (`omp ... for`, `omp ... simd`)
        inside function ``c`` was taken by a for loop (libclang without -fopenmp does not
        check the OpenMP ones; the compiler would)."""
        for line, text in sorted(self.pragmas.items()):
            loop_pragma = text.startswith("torchclad") or re.match(r"omp\b.*\b(for|simd)\b", text)
            if loop_pragma and line not in self.used_pragmas and \
                    c.extent.start.line < line <= c.extent.end.line:
                raise DiffError(Loc(self.filename, line - 1, 1),
                                f"'#pragma {text}' must come right before a for loop")

    def write_once(self, c, params: list) -> tuple:
        """uids of the parameters marked TORCHCLAD_WRITE_ONCE (pointers only)."""
        once = []
        for ch, v in zip([x for x in c.get_children() if x.kind == K.PARM_DECL], params):
            if any(a.kind == K.ANNOTATE_ATTR and a.spelling == "torchclad::write_once"
                   for a in ch.get_children()):
                if not v.type.is_pointer:
                    self.err(ch, "TORCHCLAD_WRITE_ONCE marks a pointer parameter")
                once.append(v.uid)
        return tuple(once)

    def custom_function(self, c) -> ir.Function:
        """A declaration in namespace custom_derivatives: its signature, no body."""
        params = []
        self.push()
        for ch in c.get_children():
            if ch.kind == K.PARM_DECL:
                params.append(ir.Var(ch.spelling, self.type_of(ch.type), 0))
        # named as called: its namespaces inside custom_derivatives (n1::n2::f_pullback)
        path, p = [c.spelling], c.semantic_parent
        while p is not None and p.kind == K.NAMESPACE and p.spelling != "custom_derivatives":
            path.insert(0, p.spelling)
            p = p.semantic_parent
        return ir.Function("::".join(path), tuple(params), ir.VOID, ir.Block(), self.template,
                           self.loc(c), True)

    def signature(self, c) -> tuple:
        """The parameters of ``c`` as ir.Vars (uid 0); DiffError if a type is not taken."""
        return tuple(ir.Var(ch.spelling, self.type_of(ch.type), 0)
                     for ch in c.get_children() if ch.kind == K.PARM_DECL)


def function_name(c) -> str:
    """The name the engine knows a function by: its own, or `Cls_m` for a member function."""
    if c.kind == K.CXX_METHOD:
        return names.method(c.semantic_parent.spelling, c.spelling)
    return c.spelling


def _integer_constant(c, t: ir.Type) -> "ir.Const | None":
    """The literal a namespace-scope integer constant is initialised with (`const int UNROLL =
    8;`, constexpr or static alike), as a Const of its type; None for anything else."""
    if t.real or t.is_memory or t.dims or t.ref or not c.type.is_const_qualified():
        return None
    kids = [ch for ch in c.get_children() if ch.kind.is_expression()]
    init = unwrapped(kids[0]) if len(kids) == 1 else None
    if init is None or init.kind != K.INTEGER_LITERAL:
        return None
    try:
        text = literal(init, False)
    except DiffError:
        return None
    return ir.Const(text, ir.Type(t.base))


def _collect(tu, filename: str) -> tuple[list, list, list]:
    """``(function definitions, custom derivatives, globals)`` of the main file."""
    fn_cursors, custom_cursors, global_cursors = [], [], []

    def visit(parent, in_custom=False):
        for c in parent.get_children():
            if c.location.file is None or c.location.file.name != filename:
                continue
            if c.kind == K.NAMESPACE:
                visit(c, in_custom or c.spelling == "custom_derivatives")
            elif c.kind in (K.FUNCTION_DECL, K.FUNCTION_TEMPLATE) and c.is_definition():
                (custom_cursors if in_custom else fn_cursors).append(c)
            elif c.kind == K.CXX_METHOD and c.is_definition() and not in_custom and \
                    not c.is_static_method():
                fn_cursors.append(c)          # a member function defined out of its class
            elif c.kind in (K.STRUCT_DECL, K.CLASS_DECL) and not in_custom:
                for m in c.get_children():    # member functions defined in the class
                    if m.kind == K.CXX_METHOD and m.is_definition() and \
                            not m.is_static_method():
                        fn_cursors.append(m)
            elif c.kind in (K.FUNCTION_DECL, K.FUNCTION_TEMPLATE) and in_custom:
                custom_cursors.append(c)
            elif c.kind == K.VAR_DECL and not in_custom:
                global_cursors.append(c)
            elif c.kind in (K.LINKAGE_SPEC,):
                visit(c, in_custom)

    visit(tu.cursor)
    return fn_cursors, custom_cursors, global_cursors


def _declared(tu, filename: str) -> dict:
    """Functions declared (not defined) in the main file, by name."""
    declared = {}
    for c in tu.cursor.get_children():
        if c.kind in (K.FUNCTION_DECL, K.FUNCTION_TEMPLATE) and not c.is_definition() and \
                c.location.file is not None and c.location.file.name == filename:
            declared[c.spelling] = c
    return declared


def _template_params(c, filename: str) -> tuple:
    if any(x.kind in (K.TEMPLATE_NON_TYPE_PARAMETER, K.TEMPLATE_TEMPLATE_PARAMETER)
           for x in c.get_children()):
        raise DiffError(loc_of(c, filename), f"'{c.spelling}': only type template "
                        "parameters are supported")
    return tuple(x.spelling for x in c.get_children() if x.kind == K.TEMPLATE_TYPE_PARAMETER)


def lower_source(source: str, filename: str = "kernel.cpp", extra_args: tuple = ()) -> ir.Module:
    """Parse and lower every function defined in the main file."""
    tu = parse(source, filename, extra_args)
    fn_cursors, custom_cursors, global_cursors = _collect(tu, filename)
    marks = pragmas(source)
    declared = _declared(tu, filename)
    declared.update({c.spelling: c for c in fn_cursors if c.kind != K.CXX_METHOD})
    globals_: dict = {}
    gl = Lowerer(filename, (), declared)
    constants: dict = {}
    for g in global_cursors:
        t = gl.type_of(g.type, None)
        v = ir.Var(g.spelling, t, -len(globals_) - 1)
        globals_[g.spelling] = ir.Global(v)
        value = _integer_constant(g, t)
        if value is not None:
            constants[v.uid] = value
    functions, customs, broken, signatures, bodies = {}, {}, {}, {}, {}
    for c in fn_cursors + custom_cursors:
        key = function_name(c)
        try:
            template = _template_params(c, filename)
        except DiffError as e:       # only a request that reaches c fails
            broken[key] = e
            continue
        lw = Lowerer(filename, template, declared)
        lw.globals = {n: g.var for n, g in globals_.items()}
        lw.global_constants = constants
        lw.pragmas = marks
        if c in custom_cursors:
            customs[c.spelling] = lw.custom_function(c)
            if c.is_definition():      # forward mode may differentiate a custom derivative
                body = Lowerer(filename, template, declared)
                body.globals, body.pragmas, body.global_constants = lw.globals, marks, constants
                try:
                    bodies[c.spelling] = body.function(c, custom=True)
                except DiffError as e:
                    broken.setdefault(c.spelling, e)
            continue
        try:
            signatures[key] = Lowerer(filename, template, declared).signature(c)
        except DiffError:
            pass
        if key in functions or key in broken:
            broken[key] = DiffError(loc_of(c, filename), f"'{c.spelling}' is defined twice "
                                    "(overloads are not supported)")
            functions.pop(key, None)
            continue
        # a function the request never reaches must not stop it: keep the error for later
        try:
            functions[key] = lw.function(c)
        except DiffError as e:
            broken[key] = e
    return ir.Module(functions, customs, globals_, filename, broken, signatures, bodies)
