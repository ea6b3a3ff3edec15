"""Lowering of expressions: one ``visit_<kind>`` per expression kind, calls, literals.

Statements are lowered by :class:`~.statements.Statements`; the two halves meet in
:class:`~.lower.Lowerer`.
"""
from __future__ import annotations

import re
from dataclasses import replace


from .. import ir, names
from ..errors import DiffError
from . import fence
from .literals import literal, tok_text
from .parse import binary_op, unary_op
from .scope import ASSIGN_OPS, TK, K, Scopes

_BUILTIN_TYPES = {"double", "float", "int", "long", "unsigned", "bool", "short", "char",
                  "size_t"}

_MATHF = {"exp", "log", "sqrt", "pow", "sin", "cos", "tan", "tanh", "sinh", "cosh", "erf",
          "atan", "atan2", "fabs", "fmax", "fmin", "floor", "ceil", "log1p", "expm1", "asin",
          "acos", "log2", "log10", "exp2", "cbrt", "erfc", "hypot", "round", "trunc", "fmod"}

_CAST_STYLE = {K.CSTYLE_CAST_EXPR: "c", K.CXX_FUNCTIONAL_CAST_EXPR: "fn",
               K.CXX_STATIC_CAST_EXPR: "static"}
_INCREMENTS = ("post++", "pre++", "post--", "pre--")


class Expressions(Scopes):
    """Expressions: names, literals, operators, subscripts, casts and calls."""

    def expr(self, c) -> ir.Expr:
        """The IR of expression cursor ``c``; its side effects go to ``self.pre``."""
        visit = self.visitor(c) if c.kind.is_expression() else None
        if visit is None:
            self.err(c, f"{fence.described(c, 'expression')} is not supported in "
                        "differentiated code")
        # an assignment target (lvalue) is the node itself, through parentheses only
        self.as_lvalue, self.lvalue_wanted = self.lvalue_wanted, False
        return visit(c)

    # ------------------------------------------------------------------ names and literals
    def visit_unexposed_expr(self, c) -> ir.Expr:
        """UNEXPOSED_EXPR (implicit conversions) and parentheses: the one child."""
        ch = list(c.get_children())
        if len(ch) == 1:
            self.lvalue_wanted = self.as_lvalue
            return self.expr(ch[0])
        if c.kind == K.UNEXPOSED_EXPR and not ch:
            self.err(c, "unsupported expression (dependent or implicit construct)")
        self.err(c, "unsupported expression")

    visit_paren_expr = visit_unexposed_expr

    def visit_decl_ref_expr(self, c) -> ir.Expr:
        ref = c.referenced
        if ref is not None and ref.kind == K.ENUM_CONSTANT_DECL:
            return ir.Const(c.spelling, ir.INT)
        if ref is not None and ref.kind == K.TEMPLATE_NON_TYPE_PARAMETER:
            return ir.Const(c.spelling, ir.INT)
        v = self.lookup(c)
        if v is not None and self.nondiff(ref):
            if v.type.is_memory or v.type.ref:
                self.nondiff_vars.add(v.uid)      # what is read through it is constant
            else:
                return self.detached(v)
        if v is not None and v.type.ref:
            e = ir.Index(v, ir.Const("0", ir.INT), v.type.element())   # what it binds
            return self.detached(e) if v.uid in self.nondiff_vars else e
        if v is not None:
            return v
        if ref is not None and ref.kind in (K.FUNCTION_DECL, K.FUNCTION_TEMPLATE):
            self.err(c, f"function '{c.spelling}' used as a value (function pointers "
                        "are not supported)")
        # a global from a header (M_PI via a macro expands to a literal, so this is
        # something like a named constant): spell it as written.
        t = self.type_of(c.type) if c.type.kind != TK.INVALID else ir.DOUBLE
        if ref is not None and ref.kind == K.VAR_DECL and not c.type.is_const_qualified():
            self.err(c, f"non-const global '{c.spelling}' is not supported")
        return ir.Const(_qualified(c), ir.Type(t.base, t.ptr, True, t.dims, t.real))

    def visit_integer_literal(self, c) -> ir.Expr:
        text = literal(c, False) or "0"
        base = "long" if re.search(r"[lL]$", text) else "int"
        if re.search(r"[uU]", text):
            base = "unsigned " + base
        return ir.Const(text, ir.Type(base))

    def visit_floating_literal(self, c) -> ir.Expr:
        text = literal(c, True) or "0.0"
        base = "float" if text[-1] in "fF" else (
            "long double" if text[-1] in "lL" else "double")
        return ir.Const(text, ir.Type(base, real=True))

    def visit_cxx_bool_literal_expr(self, c) -> ir.Expr:
        return ir.Const(tok_text(c) or "false", ir.BOOL)

    def visit_cxx_null_ptr_literal_expr(self, c) -> ir.Expr:
        return ir.Const("nullptr", ir.Type("void", 1))

    visit_gnu_null_expr = visit_cxx_null_ptr_literal_expr     # NULL

    def visit_character_literal(self, c) -> ir.Expr:
        return ir.Const(tok_text(c), ir.Type("char"))

    def visit_cxx_unary_expr(self, c) -> ir.Expr:
        return ir.Const(" ".join(t.spelling for t in c.get_tokens()), ir.Type("size_t"))

    # ------------------------------------------------------------------ operators
    def visit_binary_operator(self, c) -> ir.Expr:
        op = binary_op(c)
        ch = list(c.get_children())
        if op in ASSIGN_OPS:
            if self.pre is None:
                self.err(c, f"assignment '{op}' inside a conditionally evaluated "
                            "expression (?:, &&, ||) is not supported; make it a statement")
            # a = b = e: the inner assignment runs first, its value is its target
            stmts = self.expr_stmt(c)
            self.pre.extend(stmts)
            return stmts[-1].target
        if op == ",":
            # (a, b): a runs first, for its effects; the value is b's
            self.need_effects(c, "the comma operator")
            self.pre.extend(self.expr_stmt(ch[0]))
            return self.expr(ch[1])
        l = self.expr(ch[0])
        if op in ("&&", "||"):
            pre, r = self.effects(lambda: self.expr(ch[1]))
            if pre:
                # a && (x = e)  ->  bool t = a; if (t) { x = e; t = x; }    (|| tests !t)
                self.need_effects(c, f"'{op}' with side effects on its right")
                t = self.temp(names.COND_TEMP, ir.BOOL)
                test = t if op == "&&" else ir.Unary("!", t, ir.BOOL)
                L = self.loc(c)
                self.pre += [ir.Decl(t, l, (), L),
                             ir.If(test, ir.Block(tuple(pre) + (ir.Assign("=", t, r, L),)))]
                return t
        else:
            r = self.expr(ch[1])
        return ir.Binary(op, l, r, self.bin_type(op, l, r, c))

    def no_value_temp(self, c, e) -> None:
        """Refuse binding a reference or taking the address of the copy a `?:` with side
        effects leaves (its branches are different objects)."""
        if isinstance(e, ir.Var) and e.uid in self.value_temps:
            self.err(c, "a '?:' with side effects whose branches are different objects is "
                        "only supported as a value; bind or assign to each branch instead")

    def need_effects(self, c, what: str) -> None:
        if self.pre is None:
            self.err(c, f"{what} is not supported here")

    def temp(self, prefix: str, t: ir.Type) -> ir.Var:
        """A new local of the lowering (`_cond0`, ...)."""
        self.uid += 1
        n = self.n_temps.get(prefix, 0)
        self.n_temps[prefix] = n + 1
        return ir.Var(names.numbered(prefix, n), t, self.uid)

    visit_compound_assignment_operator = visit_binary_operator

    def visit_unary_operator(self, c) -> ir.Expr:
        op = unary_op(c)
        if op in _INCREMENTS:
            return self.increment(c, op)
        e = self.expr(next(c.get_children()))
        if op == "*":
            if not e.type.is_memory:
                self.err(c, "dereference of a non-pointer")
            d = ir.Unary("*", e, e.type.element())
            r = ir.root_var(e)
            return self.detached(d) if r is not None and r.uid in self.nondiff_vars else d
        if op == "&":
            e = self.undetached(e)
            self.no_value_temp(c, e)
            return ir.Unary("&", e, e.type.pointer_to() if not e.type.dims else e.type)
        if op == "!":
            return ir.Unary("!", e, ir.BOOL)
        return ir.Unary(op, e, e.type)

    def increment(self, c, op: str) -> ir.Expr:
        """``++x`` / ``x++`` inside an expression: the update goes to ``self.pre``; a postfix
        one first saves the old value in a local ``_incN``."""
        if self.pre is None:
            self.err(c, f"'{op[-2:]}' inside a conditionally evaluated expression (?:, "
                        "&&, ||) is not supported; increment in a statement of its own")
        target = self.lvalue(next(c.get_children()))
        bump = ir.Assign("+=" if "++" in op else "-=", target,
                         ir.Const("1", ir.INT), self.loc(c))
        if op.startswith("pre"):
            self.pre.append(bump)
            return target
        self.uid += 1
        self.n_inc += 1
        old_value = ir.Var(f"_inc{self.n_inc - 1}", target.type.value(), self.uid)
        self.pre.extend([ir.Decl(old_value, target, (), self.loc(c)), bump])
        return old_value

    def visit_array_subscript_expr(self, c) -> ir.Expr:
        b, i = [self.expr(x) for x in c.get_children()]
        if not b.type.is_memory:
            b, i = i, b
        if not b.type.is_memory:
            self.err(c, "subscript of a non-array")
        e = ir.Index(b, i, b.type.element())
        r = ir.root_var(b)
        return self.detached(e) if r is not None and r.uid in self.nondiff_vars else e

    def visit_conditional_operator(self, c) -> ir.Expr:
        kids = list(c.get_children())
        target = self.as_lvalue
        a = self.expr(kids[0])
        (pb, b), (pd, d) = [self.effects(lambda x=x: self.expr(x)) for x in kids[1:]]
        t = b.type if (b.type.real or not d.type.real) else d.type
        if not pb and not pd:
            return ir.Cond(a, b, d, t)
        L = self.loc(c)
        if b == d and isinstance(b, (ir.Var, ir.Index, ir.Member)):
            # c ? (t = x) : (t = y): both branches end on the same object, which it is
            self.need_effects(c, "'?:' with side effects in a branch")
            self.pre.append(ir.If(a, ir.Block(tuple(pb)), ir.Block(tuple(pd)), L))
            return b
        if target:
            self.err(c, "a '?:' with side effects whose branches are different objects, used "
                        "as an assignment target, is not supported; assign in each branch")
        # c ? (x = e) : y  ->  T t; if (c) { x = e; t = x; } else { t = y; }
        self.need_effects(c, "'?:' with side effects in a branch")
        v = self.temp(names.COND_TEMP, t.value())
        self.value_temps.add(v.uid)         # a copy: no reference or address may bind it
        self.pre += [ir.Decl(v, None, (), L),
                     ir.If(a, ir.Block(tuple(pb) + (ir.Assign("=", v, b, L),)),
                           ir.Block(tuple(pd) + (ir.Assign("=", v, d, L),)), L)]
        return v

    def visit_cstyle_cast_expr(self, c) -> ir.Expr:
        kids = [x for x in c.get_children() if x.kind.is_expression()]
        if not kids:
            self.err(c, "cast without an operand")
        t = self.type_of(c.type, None)
        return ir.Cast(self.expr(kids[-1]), t, _CAST_STYLE[c.kind])

    visit_cxx_functional_cast_expr = visit_cxx_static_cast_expr = visit_cstyle_cast_expr

    def visit_cxx_const_cast_expr(self, c) -> ir.Expr:
        """const_cast<T&>(x) / const_cast<T*>(p): the same value, const dropped (kept in the
        printed code: `*const_cast<T*>(&x)`)."""
        kids = [x for x in c.get_children() if x.kind.is_expression()]
        e = self.undetached(self.expr(kids[-1]))
        t = self.type_of(c.type, None, allow_ref=True)
        if c.type.get_canonical().kind != TK.POINTER:     # const_cast<T&>: an lvalue of T
            if not (isinstance(e, (ir.Index, ir.Member)) or
                    (isinstance(e, ir.Var) and not e.type.is_memory)):
                self.err(c, "const_cast of a value that is no variable or element")
            p = ir.Type(t.base, 1, False, (), t.real, record=t.record, fields=t.fields)
            addr = ir.Unary("&", e, ir.Type(t.base, 1, True, (), t.real, record=t.record,
                                            fields=t.fields))
            return ir.Unary("*", ir.Cast(addr, p, "const"), p.element())
        return ir.Cast(e, t, "const")

    def visit_cxx_reinterpret_cast_expr(self, c) -> ir.Expr:
        """reinterpret_cast, dynamic_cast."""
        self.err(c, f"{c.kind.name.lower().replace('_expr', '').replace('cxx_', '')} is not "
                    "supported in differentiated code")

    visit_cxx_dynamic_cast_expr = visit_cxx_reinterpret_cast_expr

    def visit_init_list_expr(self, c) -> ir.Expr:
        kids = list(c.get_children())
        if not kids:
            return ir.Const("{}", ir.INT)
        if len(kids) == 1:
            return self.expr(kids[0])
        self.err(c, "brace initializer lists are only supported for local arrays")

    # ------------------------------------------------------------------ calls
    def visit_call_expr(self, c) -> ir.Expr:
        kids = list(c.get_children())
        if kids and kids[0].kind == K.TYPE_REF:          # T(x) in a template
            t = self.type_of(c.type, None)
            if len(kids) == 1:
                return ir.Const("0", t)
            return ir.Cast(self.expr(kids[1]), t, "fn")
        toks = [t.spelling for t in c.get_tokens()][:4]
        if len(kids) == 1 and len(toks) > 1 and toks[0] in _BUILTIN_TYPES and toks[1] == "(":
            # double(x) with a type-dependent x: an unresolved construct expression
            return ir.Cast(self.expr(kids[0]), self.type_of(c.type, None), "fn")
        if not kids:
            # implicit construction (e.g. T() in a template): value-initialised
            self.err(c, f"call '{c.spelling}' with no callee expression is not supported")
        callee = kids[0]
        ref = c.referenced
        if ref is not None and ref.kind == K.CONSTRUCTOR and len(kids) == 1 and \
                (ref.is_copy_constructor() or ref.is_move_constructor()):
            return self.expr(kids[0])        # a struct copied (an argument passed by value)
        if ref is not None and ref.kind == K.CXX_METHOD and not ref.is_static_method() and \
                ref.spelling != "operator=":
            return self.method_call(c, ref, callee, kids[1:])
        args = tuple(self.expr(a) for a in kids[1:])
        if self.calls_user_function(c, ""):
            args = self.bind_reference_args(c, args)
        spelled = "".join(t.spelling for t in callee.get_tokens()) or c.spelling
        if not _CALLEE.match(spelled):        # a macro expansion: name it from the cursor
            spelled = _callee_name(callee) or c.spelling
        name = ir.call_name(spelled)
        t = self.call_type(c, name, args)
        rt = ir.Type(t.base, t.ptr, False, (), t.real)
        if self.nondiff(ref):                # not differentiated: a constant
            return self.detached(ir.Call(spelled, args, rt, False))
        call = ir.Call(spelled, args, rt, self.calls_user_function(c, name))
        return self.referred(call, ref)

    def referred(self, call, ref) -> ir.Expr:
        """A call of a function returning a reference: the IR call yields the address, the
        expression is what it refers to (`f(x)` is `f(x)[0]`)."""
        if not call.user or ref is None or \
                ref.result_type.kind not in (TK.LVALUEREFERENCE, TK.RVALUEREFERENCE):
            return call       # a library function's reference result (std::max) is a value
        t = self.type_of(ref.result_type, None, allow_ref=True)
        return ir.Index(ir.Call(call.fn, call.args, t, call.user, call.method),
                        ir.Const("0", ir.INT), t.element())

    def method_call(self, c, ref, callee, arg_cursors) -> ir.Expr:
        """`obj.m(a)` / `p->m(a)` / `m(a)` in a member function: a call of the engine's
        function `Cls_m` whose first argument points at the object."""
        objs = [x for x in callee.walk_preorder() if x.kind == K.MEMBER_REF_EXPR]
        base_c = [x for x in objs[0].get_children() if x.kind.is_expression()] if objs else []
        if base_c:
            obj = self.expr(base_c[0])
            ptr = obj if obj.type.ptr and not obj.type.ref else \
                ir.Unary("&", obj, obj.type.pointer_to())
        elif self.this_obj is not None:
            ptr = self.this_obj.operand
        else:
            self.err(c, f"call to member function '{ref.spelling}' without its object")
        args = self.bind_reference_args(c, tuple(self.expr(a) for a in arg_cursors))
        cls = ref.semantic_parent.spelling
        t = self.call_type(c, "", args)
        call = ir.Call(names.method(cls, ref.spelling), (ptr,) + args,
                       ir.Type(t.base, t.ptr, False, (), t.real), not self.nondiff(ref),
                       ref.spelling)
        return self.detached(call) if self.nondiff(ref) else self.referred(call, ref)

    def visit_cxx_this_expr(self, c) -> ir.Expr:
        if self.this_obj is None:
            self.err(c, "'this' outside a member function")
        return self.this_obj.operand

    def bind_reference_args(self, c, args: tuple) -> tuple:
        """The arguments of a call to a user function, those given to a reference parameter
        as the address they bind (`&x`, spelled `x`)."""
        ref = c.referenced
        parms = [x for x in ref.get_children() if x.kind == K.PARM_DECL] if ref else []
        out = list(args)
        for i, (pd, a) in enumerate(zip(parms, args)):
            if pd.type.kind in (TK.LVALUEREFERENCE, TK.RVALUEREFERENCE):
                t = self.type_of(pd.type, pd, allow_ref=True)     # refuses T*& with a reason
                out[i] = self.bind_reference(c, a, t)
        return tuple(out)

    def bind_reference(self, c, e, t: ir.Type) -> ir.Expr:
        """A reference of type t bound to e: its address; a temporary (a value that is not
        a variable or an element) is first kept in a local `_refN`."""
        self.no_value_temp(c, e)
        if isinstance(e, (ir.Index, ir.Member)) or \
                (isinstance(e, ir.Var) and (not e.type.is_memory or e.type.is_object)):
            return ir.Unary("&", e, replace(e.type, ptr=1, dims=(), vector=False, ref=True))
        if self.pre is None:
            self.err(c, "a value passed by reference inside a conditionally evaluated "
                        "expression (?:, &&, ||) is not supported; compute it into a variable "
                        "first")
        self.uid += 1
        tmp = ir.Var(names.ref_temp(self.n_ref), replace(t.element(), const=False), self.uid)
        self.n_ref += 1
        self.pre.append(ir.Decl(tmp, e, (), self.loc(c)))
        return ir.Unary("&", tmp, replace(t, const=False))

    def calls_user_function(self, c, name: str) -> bool:
        """Whether call ``c`` goes to a function defined in this source (not a custom
        derivative), which the engine then differentiates too."""
        ref = c.referenced
        if ref is not None and ref.kind in (K.FUNCTION_DECL, K.FUNCTION_TEMPLATE):
            return ref.location.file is not None and ref.location.file.name == self.filename \
                and not _in_namespace(ref, "custom_derivatives")
        return name in self.module_fns and self.module_fns[name].is_definition()

    def call_type(self, c, name: str, args: tuple) -> ir.Type:
        """The result type of call ``c``; for a type-dependent one, worked out from the callee
        or the arguments."""
        t = None
        if c.type.kind not in (TK.DEPENDENT, TK.INVALID):
            t = self.type_of(c.type, None)
        decl = self.module_fns.get(name) if isinstance(self.module_fns, dict) else None
        if decl is not None and (t is None or t.base in ("", "<dependent type>") or
                                 c.type.kind == TK.DEPENDENT):
            t = self.callee_result(decl, args) or t
        if t is None or (t.base in ("", "<dependent type>")):
            reals = [a.type for a in args if a.type.real and not a.type.is_memory]
            if name.endswith("f") and name[:-1] in _MATHF:
                t = ir.Type("float", real=True)
            else:
                t = reals[0] if reals else ir.DOUBLE
        return t

    def callee_result(self, decl, args) -> "ir.Type | None":
        """Result type of a type-dependent call to a function of this source."""
        rt = decl.result_type
        if rt.kind == TK.VOID:
            return ir.VOID
        tparams = [x.spelling for x in decl.get_children()
                   if x.kind == K.TEMPLATE_TYPE_PARAMETER]
        spelled = re.sub(r"\bconst\b", "", rt.spelling).strip()
        if spelled in tparams:       # the callee's T, deduced from an argument spelled with T
            parms = [x for x in decl.get_children() if x.kind == K.PARM_DECL]
            for pd, a in zip(parms, args):
                if re.search(rf"\b{re.escape(spelled)}\b", pd.type.spelling) and a.type.real:
                    return ir.Type(a.type.base, real=True)
            return None
        if not tparams:
            try:
                return self.type_of(rt, None)
            except DiffError:
                return None
        return None



# ---------------------------------------------------------------------- names of callees
_CALLEE = re.compile(r"^(::)?[A-Za-z_]\w*(<[\w\s:,*&<>]*>)?(::[A-Za-z_]\w*(<[\w\s:,*&<>]*>)?)*$")


def _callee_name(callee) -> str:
    for x in callee.walk_preorder():
        if x.kind in (K.DECL_REF_EXPR, K.OVERLOADED_DECL_REF):
            parts = [y.spelling for y in x.get_children() if y.kind == K.NAMESPACE_REF]
            return "::".join(parts + [x.spelling])
    return ""


def _qualified(c) -> str:
    parts = [x.spelling for x in c.get_children() if x.kind == K.NAMESPACE_REF]
    return "::".join(parts + [c.spelling])


def _in_namespace(cursor, name: str) -> bool:
    p = cursor.semantic_parent
    while p is not None and p.kind != K.TRANSLATION_UNIT:
        if p.kind == K.NAMESPACE and p.spelling == name:
            return True
        p = p.semantic_parent
    return False
