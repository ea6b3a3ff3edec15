"""Lower libclang cursors into the engine's IR, then let the cursors go.

Names: every declaration gets a name that is unique where it is visible. A local that
shadows a visible name, or a user identifier that could collide with generated names
(anything starting with '_'), is renamed deterministically.
"""
from __future__ import annotations

import re
from dataclasses import replace

import clang.cindex as ci

from .. import ir
from ..errors import DiffError, Loc
from . import fence
from .parse import binary_op, loc_of, parse, pragmas, unary_op

K = ci.CursorKind
TK = ci.TypeKind

_FLOAT_KINDS = {TK.FLOAT, TK.DOUBLE, TK.LONGDOUBLE}
_ASSIGN_OPS = {"=", "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "|=", "^="}


call_name = ir.call_name


class _Lowerer:
    def __init__(self, filename: str, template: tuple, module_fns: set):
        self.filename = filename
        self.template = template
        self.module_fns = module_fns
        self.scopes: list[dict] = []          # decl key -> ir.Var
        self.visible: list[set] = []
        self.used_names: set = set()
        self.uid = 0
        self.globals: dict = {}
        self.pre: list | None = None      # side effects pulled out of the expression at hand
        self.pragmas: dict = {}           # line -> pragma text (omp / torchclad)
        self.n_inc = 0
        self.used_pragmas: set = set()   # lines of torchclad pragmas a loop took

    # ------------------------------------------------------------------ helpers
    def loc(self, c) -> Loc:
        return loc_of(c, self.filename)

    def err(self, c, msg: str):
        raise DiffError(self.loc(c), msg)

    def type_of(self, t, c=None) -> ir.Type:
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
                if c is not None:
                    self.err(c, "references are not supported in differentiated code; "
                                "use a pointer")
                t = t.get_pointee()
            elif k == TK.ELABORATED and t.get_named_type().kind in (
                    TK.POINTER, TK.CONSTANTARRAY, TK.INCOMPLETEARRAY):
                t = t.get_named_type()
            else:
                break
        if ptr > 1 and c is not None:
            self.err(c, "pointers to pointers are not supported; pass flat arrays")
        const = t.is_const_qualified()
        spelling = re.sub(r"\bconst\b|\bvolatile\b|\brestrict\b|__restrict__|__restrict", "",
                          t.spelling).strip()
        spelling = re.sub(r"\s+", " ", spelling)
        canon = t.get_canonical()
        real = canon.kind in _FLOAT_KINDS or spelling in self.template
        if canon.kind in (TK.RECORD,) and c is not None:
            self.err(c, f"type '{spelling}' (a struct/class) is not supported; "
                        "use scalars and arrays")
        return ir.Type(spelling, ptr, const, tuple(dims), real)

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
        return self.globals.get(ref.spelling) if ref.kind == K.VAR_DECL else None

    def push(self):
        self.scopes.append({})
        self.visible.append(set())

    def pop(self):
        self.scopes.pop()
        self.visible.pop()

    # ------------------------------------------------------------------ functions
    def function(self, c, custom=False) -> ir.Function:
        fence.check(c, self.filename)
        for ch in c.walk_preorder():
            if ch.kind in (K.VAR_DECL, K.PARM_DECL):
                self.used_names.add(ch.spelling)
        self.push()
        params = []
        for ch in c.get_children():
            if ch.kind == K.PARM_DECL:
                if not ch.spelling:
                    self.err(ch, "unnamed parameters are not supported")
                params.append(self.new_var(ch, ch.spelling, self.type_of(ch.type, ch)))
        ret = self.type_of(c.result_type, None)
        if ret.ptr:
            self.err(c, f"'{c.spelling}' returns a pointer; differentiated functions return "
                        "float/double/void (write outputs through pointer parameters)")
        body = None
        for ch in c.get_children():
            if ch.kind == K.COMPOUND_STMT:
                body = self.block(ch)
        self.pop()
        for line, text in sorted(self.pragmas.items()):
            if text.startswith("torchclad") and line not in self.used_pragmas and \
                    c.extent.start.line < line <= c.extent.end.line:
                raise DiffError(Loc(self.filename, line - 1, 1),
                                f"'#pragma {text}' must come right before a for loop")
        if body is None:
            self.err(c, f"'{c.spelling}' has no body in this source; define it here or give it "
                        "a custom derivative in namespace clad::custom_derivatives")
        names = tuple(ch.spelling for ch in c.get_children() if ch.kind == K.PARM_DECL)
        once = []
        for ch, v in zip([x for x in c.get_children() if x.kind == K.PARM_DECL], params):
            if any(a.kind == K.ANNOTATE_ATTR and a.spelling == "torchclad::write_once"
                   for a in ch.get_children()):
                if not v.type.is_pointer:
                    self.err(ch, "TORCHCLAD_WRITE_ONCE marks a pointer parameter")
                once.append(v.uid)
        return ir.Function(c.spelling, tuple(params), ret, body, self.template, self.loc(c),
                           custom, names, tuple(once))

    def effects(self, thunk):
        """Lower with side effects (x[i++], --n > 0) allowed; returns (pre, value)."""
        saved, self.pre = self.pre, []
        try:
            value = thunk()
            return self.pre, value
        finally:
            self.pre = saved

    def pure(self, thunk):
        saved, self.pre = self.pre, None
        try:
            return thunk()
        finally:
            self.pre = saved

    # ------------------------------------------------------------------ statements
    def block(self, c) -> ir.Block:
        self.push()
        out = []
        for ch in c.get_children():
            out.extend(self.stmt(ch))
        self.pop()
        return ir.Block(tuple(out), self.loc(c))

    def as_block(self, c) -> ir.Block:
        if c.kind == K.COMPOUND_STMT:
            return self.block(c)
        self.push()
        stmts = self.stmt(c)
        self.pop()
        return ir.Block(tuple(stmts), self.loc(c))

    def stmt(self, c) -> list:
        k = c.kind
        L = self.loc(c)
        if k == K.COMPOUND_STMT:
            return [self.block(c)]
        if k == K.DECL_STMT:
            out = []
            for d in c.get_children():
                if d.kind == K.VAR_DECL:
                    pre, decl = self.effects(lambda: self.var_decl(d))
                    out.extend(pre + [decl])
                else:
                    self.err(d, f"declaration of kind {d.kind.name} is not supported here")
            return out
        if k == K.NULL_STMT:
            return []
        if k == K.IF_STMT:
            ch = list(c.get_children())
            if any(x.kind == K.DECL_STMT or x.kind == K.VAR_DECL for x in ch):
                self.err(c, "declarations inside an if condition are not supported; declare "
                            "the variable before the if")
            pre, cond = self.effects(lambda: self.expr(ch[0]))
            then = self.as_block(ch[1])
            other = self.as_block(ch[2]) if len(ch) > 2 else ir.Block()
            return pre + [ir.If(cond, then, other, L)]
        if k == K.FOR_STMT:
            return [self.for_stmt(c)]
        if k == K.WHILE_STMT:
            ch = list(c.get_children())
            if ch[0].kind in (K.VAR_DECL, K.DECL_STMT):
                self.err(c, "declarations inside a while condition are not supported")
            pre, cond = self.effects(lambda: self.expr(ch[0]))
            return [self.loop_with_effects((), pre, cond, (), self.as_block(ch[1]), L)]
        if k == K.DO_STMT:
            ch = list(c.get_children())
            pre, cond = self.effects(lambda: self.expr(ch[1]))
            if pre:
                self.err(c, "a do-while condition with side effects (++, --) is not "
                            "supported; update the variable inside the loop body")
            return [ir.Loop((), cond, (), self.as_block(ch[0]), L, do_while=True)]
        if k == K.SWITCH_STMT:
            ch = list(c.get_children())
            pre, cond = self.effects(lambda: self.expr(ch[0]))
            body = ch[-1]
            self.push()
            items = []
            for s in (body.get_children() if body.kind == K.COMPOUND_STMT else [body]):
                items.extend(self.case_items(s))
            self.pop()
            return pre + [ir.Switch(cond, ir.Block(tuple(items), self.loc(body)), L)]
        if k in (K.CASE_STMT, K.DEFAULT_STMT):
            self.err(c, "case label outside a switch body block is not supported")
        if k == K.BREAK_STMT:
            return [ir.Break(L)]
        if k == K.CONTINUE_STMT:
            return [ir.Continue(L)]
        if k == K.RETURN_STMT:
            ch = list(c.get_children())
            if not ch:
                return [ir.Return(None, L)]
            pre, value = self.effects(lambda: self.expr(ch[0]))
            return pre + [ir.Return(value, L)]
        if k.is_expression() or k == K.UNEXPOSED_STMT:
            pre, stmts = self.effects(lambda: self.expr_stmt(c))
            return pre + stmts
        self.err(c, f"statement of kind {k.name} is not supported in differentiated code")

    def case_items(self, s) -> list:
        if s.kind == K.CASE_STMT:
            ch = list(s.get_children())
            return [ir.Case(self.expr(ch[0]), self.loc(s))] + self.case_items(ch[-1])
        if s.kind == K.DEFAULT_STMT:
            ch = list(s.get_children())
            return [ir.Case(None, self.loc(s))] + self.case_items(ch[-1])
        return self.stmt(s)

    def for_stmt(self, c) -> ir.Loop:
        kids = list(c.get_children())
        body_c = kids[-1]
        parts = {"init": None, "cond": None, "inc": None}
        # libclang omits empty for-clauses; place each child by the ';' it precedes.
        toks = list(c.get_tokens())
        depth, semis, close = 0, [], None
        for t in toks:
            if t.spelling == "(":
                depth += 1
            elif t.spelling == ")":
                depth -= 1
                if depth == 0:
                    close = t.extent.start.offset
                    break
            elif t.spelling == ";" and depth == 1:
                semis.append(t.extent.start.offset)
        if len(semis) != 2 or close is None:
            self.err(c, "could not read this for statement's header (macro-generated "
                        "for loops are not supported)")
        for ch in kids[:-1]:
            off = ch.extent.start.offset
            slot = "init" if off < semis[0] else ("cond" if off < semis[1] else "inc")
            parts[slot] = ch
        self.push()
        init = self.stmt(parts["init"]) if parts["init"] is not None else []
        if parts["cond"] is not None and parts["cond"].kind in (K.VAR_DECL, K.DECL_STMT):
            self.err(parts["cond"], "declarations inside a for condition are not supported")
        pre, cond = self.effects(lambda: self.expr(parts["cond"])) \
            if parts["cond"] is not None else ([], None)
        inc = []
        if parts["inc"] is not None:
            ipre, inc = self.effects(lambda: self.expr_stmt(parts["inc"]))
            inc = ipre + inc
        body = self.as_block(body_c)
        self.pop()
        loop = self.loop_with_effects(tuple(init), pre, cond, tuple(inc), body, self.loc(c))
        pragma = self.pragmas.get(c.extent.start.line, "")
        if pragma.startswith("torchclad"):
            return replace(loop, pragma=self.checkpoint_pragma(c, pragma))
        if pragma.startswith("omp"):
            words = pragma.split()
            if words[:3] == ["omp", "parallel", "for"] or words[:2] == ["omp", "for"]:
                return replace(loop, pragma=pragma)
            if words[:2] != ["omp", "simd"]:
                self.err(c, f"'#pragma {pragma}' is not supported; only '#pragma omp parallel "
                            "for' (and 'omp simd') on a for loop are")
        return loop

    def checkpoint_pragma(self, c, pragma: str) -> str:
        """`torchclad checkpoint [every(K)] [state(a[s:n], ...)]`, checked, with the names in
        its clauses spelled as the lowered code spells them."""
        self.used_pragmas.add(c.extent.start.line)
        m = re.fullmatch(r"torchclad\s+checkpoint((?:\s+(?:every|state)\s*\(.*?\))*)\s*",
                         pragma)
        if not m:
            self.err(c, f"'#pragma {pragma}' is not understood; the torchclad pragma is "
                        "'#pragma torchclad checkpoint [every(K)] [state(a[start:count], ...)]'")

        def rename(word):
            w = word.group(0)
            if w in ("every", "state"):
                return w
            for scope in reversed(self.scopes):
                for key, v in scope.items():
                    if key[2] == w:
                        return v.name
            if w in self.globals:
                return w
            self.err(c, f"'#pragma {pragma}': '{w}' is not a variable visible at this loop")
        clauses = re.sub(r"\b[A-Za-z_]\w*\b", rename, m.group(1))
        return ("torchclad checkpoint " + re.sub(r"\s+", " ", clauses).strip()).strip()

    def loop_with_effects(self, init, pre, cond, inc, body, L) -> ir.Loop:
        """`while (i-- > 0) body` -> `for (;;) { c = i > 0; i -= 1; if (!c) break; body }`"""
        if not pre:
            return ir.Loop(init, cond, inc, body, L)
        test = ir.If(ir.Unary("!", cond, ir.BOOL), ir.Block((ir.Break(L),)))
        return ir.Loop(init, None, inc, ir.Block(tuple(pre) + (test,) + body.stmts, body.loc), L)

    def var_decl(self, d) -> ir.Decl:
        typ = self.type_of(d.type, d)
        static = d.storage_class == ci.StorageClass.STATIC
        if static and not typ.const:
            self.err(d, f"static local '{d.spelling}' keeps state between calls; only "
                        "'static const' locals are supported")
        kids = [x for x in d.get_children() if x.kind.is_expression()]
        init, init_list = None, ()
        if typ.dims:
            il = [x for x in kids if x.kind == K.INIT_LIST_EXPR]
            if il:
                init_list = tuple(self.expr(x) for x in il[0].get_children())
        elif kids:
            init = self.expr(kids[-1])
            if typ.ptr == 0 and init is not None and isinstance(init, ir.Const) and \
                    init.text == "{}":
                init = ir.Const("0", typ)
        v = self.new_var(d, d.spelling, typ)
        return ir.Decl(v, init, init_list, self.loc(d), static)

    def expr_stmt(self, c) -> list:
        k = c.kind
        L = self.loc(c)
        if k in (K.BINARY_OPERATOR, K.COMPOUND_ASSIGNMENT_OPERATOR):
            op = binary_op(c)
            ch = list(c.get_children())
            if op == ",":
                return self.expr_stmt(ch[0]) + self.expr_stmt(ch[1])
            if op in _ASSIGN_OPS:
                if op not in ("=", "+=", "-=", "*=", "/="):
                    target = self.expr(ch[0])
                    if target.type.real:
                        self.err(c, f"operator {op} on a floating value is not supported")
                    return [ir.Assign(op, target, self.expr(ch[1]), L)]
                return [ir.Assign(op, self.lvalue(ch[0]), self.expr(ch[1]), L)]
        if k == K.UNARY_OPERATOR:
            op = unary_op(c)
            if op in ("post++", "pre++", "post--", "pre--"):
                target = self.lvalue(next(c.get_children()))
                one = ir.Const("1", ir.INT)
                return [ir.Assign("+=" if "++" in op else "-=", target, one, L)]
        if k == K.PAREN_EXPR or (k == K.UNEXPOSED_EXPR and len(list(c.get_children())) == 1):
            return self.expr_stmt(next(c.get_children()))
        if k in (K.CALL_EXPR,):
            return [ir.ExprStmt(self.expr(c), L)]
        if k in (K.CSTYLE_CAST_EXPR, K.CXX_STATIC_CAST_EXPR) and c.type.kind == TK.VOID:
            inner = [x for x in c.get_children() if x.kind.is_expression()]
            return self.expr_stmt(inner[-1]) if inner else []     # (void)f(x); is f(x);
        e = self.expr(c)
        return []                          # an expression statement without effect

    def lvalue(self, c) -> ir.Expr:
        e = self.expr(c)
        if not isinstance(e, (ir.Var, ir.Index)) and not (isinstance(e, ir.Unary) and e.op == "*"):
            self.err(c, "assignment target must be a variable, an array element or *pointer")
        if isinstance(e, ir.Unary):
            return ir.Index(e.operand, ir.Const("0", ir.INT), e.type)
        return e

    # ------------------------------------------------------------------ expressions
    def expr(self, c) -> ir.Expr:
        k = c.kind
        if k in (K.UNEXPOSED_EXPR, K.PAREN_EXPR):
            ch = [x for x in c.get_children()]
            if len(ch) == 1:
                inner = self.expr(ch[0])
                return inner if k == K.UNEXPOSED_EXPR else inner
            if k == K.UNEXPOSED_EXPR and not ch:
                self.err(c, "unsupported expression (dependent or implicit construct)")
            self.err(c, "unsupported expression")
        if k == K.DECL_REF_EXPR:
            ref = c.referenced
            if ref is not None and ref.kind == K.ENUM_CONSTANT_DECL:
                return ir.Const(c.spelling, ir.INT)
            if ref is not None and ref.kind == K.TEMPLATE_NON_TYPE_PARAMETER:
                return ir.Const(c.spelling, ir.INT)
            v = self.lookup(c)
            if v is None:
                if ref is not None and ref.kind in (K.FUNCTION_DECL, K.FUNCTION_TEMPLATE):
                    self.err(c, f"function '{c.spelling}' used as a value (function pointers "
                                "are not supported)")
                # a global from a header (M_PI via a macro expands to a literal, so this is
                # something like a named constant): spell it as written.
                t = self.type_of(c.type) if c.type.kind != TK.INVALID else ir.DOUBLE
                if ref is not None and ref.kind == K.VAR_DECL and not c.type.is_const_qualified():
                    self.err(c, f"non-const global '{c.spelling}' is not supported")
                return ir.Const(_qualified(c), ir.Type(t.base, t.ptr, True, t.dims, t.real))
            return v
        if k == K.INTEGER_LITERAL:
            text = _literal(c, False) or "0"
            base = "long" if re.search(r"[lL]$", text) else "int"
            if re.search(r"[uU]", text):
                base = "unsigned " + base
            return ir.Const(text, ir.Type(base))
        if k == K.FLOATING_LITERAL:
            text = _literal(c, True) or "0.0"
            base = "float" if text[-1] in "fF" else (
                "long double" if text[-1] in "lL" else "double")
            return ir.Const(text, ir.Type(base, real=True))
        if k == K.CXX_BOOL_LITERAL_EXPR:
            return ir.Const(_tok_text(c) or "false", ir.BOOL)
        if k == K.CXX_NULL_PTR_LITERAL_EXPR:
            return ir.Const("nullptr", ir.Type("void", 1))
        if k == K.CHARACTER_LITERAL:
            return ir.Const(_tok_text(c), ir.Type("char"))
        if k == K.CXX_UNARY_EXPR:
            return ir.Const(" ".join(t.spelling for t in c.get_tokens()), ir.Type("size_t"))
        if k == K.BINARY_OPERATOR or k == K.COMPOUND_ASSIGNMENT_OPERATOR:
            op = binary_op(c)
            ch = list(c.get_children())
            if op in _ASSIGN_OPS:
                if self.pre is None:
                    self.err(c, f"assignment '{op}' inside a conditionally evaluated "
                                "expression (?:, &&, ||) is not supported; make it a statement")
                # a = b = e: the inner assignment runs first, its value is its target
                stmts = self.expr_stmt(c)
                self.pre.extend(stmts)
                return stmts[-1].target
            if op == ",":
                self.err(c, "the comma operator inside an expression is not supported; split "
                            "it into statements")
            l = self.expr(ch[0])
            r = self.pure(lambda: self.expr(ch[1])) if op in ("&&", "||") else self.expr(ch[1])
            return ir.Binary(op, l, r, self.bin_type(op, l, r, c))
        if k == K.UNARY_OPERATOR:
            op = unary_op(c)
            if op in ("post++", "pre++", "post--", "pre--"):
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
            e = self.expr(next(c.get_children()))
            if op == "*":
                if not e.type.is_memory:
                    self.err(c, "dereference of a non-pointer")
                return ir.Unary("*", e, e.type.element())
            if op == "&":
                return ir.Unary("&", e, e.type.pointer_to() if not e.type.dims else e.type)
            if op == "!":
                return ir.Unary("!", e, ir.BOOL)
            return ir.Unary(op, e, e.type)
        if k == K.ARRAY_SUBSCRIPT_EXPR:
            b, i = [self.expr(x) for x in c.get_children()]
            if not b.type.is_memory:
                b, i = i, b
            if not b.type.is_memory:
                self.err(c, "subscript of a non-array")
            return ir.Index(b, i, b.type.element())
        if k == K.CONDITIONAL_OPERATOR:
            kids = list(c.get_children())
            a = self.expr(kids[0])
            b, d = [self.pure(lambda x=x: self.expr(x)) for x in kids[1:]]
            t = b.type if (b.type.real or not d.type.real) else d.type
            return ir.Cond(a, b, d, t)
        if k in (K.CSTYLE_CAST_EXPR, K.CXX_FUNCTIONAL_CAST_EXPR, K.CXX_STATIC_CAST_EXPR):
            kids = [x for x in c.get_children() if x.kind.is_expression()]
            if not kids:
                self.err(c, "cast without an operand")
            t = self.type_of(c.type, None)
            style = {K.CSTYLE_CAST_EXPR: "c", K.CXX_FUNCTIONAL_CAST_EXPR: "fn",
                     K.CXX_STATIC_CAST_EXPR: "static"}[k]
            return ir.Cast(self.expr(kids[-1]), t, style)
        if k in (K.CXX_REINTERPRET_CAST_EXPR, K.CXX_CONST_CAST_EXPR, K.CXX_DYNAMIC_CAST_EXPR):
            self.err(c, f"{k.name.lower().replace('_expr', '').replace('cxx_', '')} is not "
                        "supported in differentiated code")
        if k == K.CALL_EXPR:
            return self.call(c)
        if k == K.INIT_LIST_EXPR:
            kids = list(c.get_children())
            if not kids:
                return ir.Const("{}", ir.INT)
            if len(kids) == 1:
                return self.expr(kids[0])
            self.err(c, "brace initializer lists are only supported for local arrays")
        self.err(c, f"expression of kind {k.name} is not supported in differentiated code")

    def call(self, c) -> ir.Expr:
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
        args = tuple(self.expr(a) for a in kids[1:])
        spelled = "".join(t.spelling for t in callee.get_tokens()) or c.spelling
        if not _CALLEE.match(spelled):        # a macro expansion: name it from the cursor
            spelled = _callee_name(callee) or c.spelling
        name = call_name(spelled)
        ref = c.referenced
        user = False
        if ref is not None and ref.kind in (K.FUNCTION_DECL, K.FUNCTION_TEMPLATE):
            user = ref.location.file is not None and ref.location.file.name == self.filename \
                and not _in_namespace(ref, "custom_derivatives")
        elif name in self.module_fns and self.module_fns[name].is_definition():
            user = True
        t = None
        if c.type.kind not in (TK.DEPENDENT, TK.INVALID):
            t = self.type_of(c.type, None)
        decl = self.module_fns.get(name) if isinstance(self.module_fns, dict) else None
        if decl is not None and (t is None or t.base in ("", "<dependent type>") or
                                 c.type.kind == TK.DEPENDENT):
            t = self._callee_result(decl, args) or t
        if t is None or (t.base in ("", "<dependent type>")):
            reals = [a.type for a in args if a.type.real and not a.type.is_memory]
            if name.endswith("f") and name[:-1] in _MATHF:
                t = ir.Type("float", real=True)
            else:
                t = reals[0] if reals else ir.DOUBLE
        return ir.Call(spelled, args, ir.Type(t.base, t.ptr, False, (), t.real), user)

    def _callee_result(self, decl, args) -> "ir.Type | None":
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

    def bin_type(self, op, l, r, c) -> ir.Type:
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
            if c.type.kind in _FLOAT_KINDS:
                return ir.Type(c.type.spelling, real=True)
            return ir.Type(best.base, real=True)
        return ir.Type(l.type.base if l.type.base != "bool" else "int")


_BUILTIN_TYPES = {"double", "float", "int", "long", "unsigned", "bool", "short", "char",
                  "size_t"}

_MATHF = {"exp", "log", "sqrt", "pow", "sin", "cos", "tan", "tanh", "sinh", "cosh", "erf",
          "atan", "atan2", "fabs", "fmax", "fmin", "floor", "ceil", "log1p", "expm1", "asin",
          "acos", "log2", "log10", "exp2", "cbrt", "erfc", "hypot", "round", "trunc", "fmod"}


def _tok_text(c) -> str:
    toks = [t.spelling for t in c.get_tokens()]
    return toks[0] if len(toks) == 1 else "".join(toks)


_NUMBER = re.compile(r"^(0[xX][0-9a-fA-F.pP+-]+|[0-9.]+([eE][+-]?[0-9]+)?)[fFlLuU]*$")


def _literal(c, floating: bool) -> str:
    """A literal's spelling. Under a macro expansion (M_PI, a #define'd constant) the
    cursor's tokens are not the literal, so the value is evaluated and spelled instead."""
    toks = [t.spelling for t in c.get_tokens()]
    if len(toks) == 1 and _NUMBER.match(toks[0]):
        return toks[0]
    lib = _eval_lib()
    res = lib.clang_Cursor_Evaluate(c)
    if not res:
        raise DiffError(None, f"cannot read the value of a literal from a macro expansion")
    try:
        if floating:
            v = lib.clang_EvalResult_getAsDouble(res)
            text = repr(float(v))
            if "e" not in text and "." not in text and "inf" not in text and "nan" not in text:
                text += ".0"
            return text + ("f" if c.type.kind == TK.FLOAT else "")
        return str(lib.clang_EvalResult_getAsLongLong(res))
    finally:
        lib.clang_EvalResult_dispose(res)


def _eval_lib():
    """libclang's evaluation API with explicit ctypes signatures (the bindings leave the
    result as int, which truncates the pointer)."""
    import ctypes
    lib = ci.conf.lib
    if not getattr(lib, "_torchclad_eval_ready", False):
        lib.clang_Cursor_Evaluate.argtypes = [ci.Cursor]
        lib.clang_Cursor_Evaluate.restype = ctypes.c_void_p
        lib.clang_EvalResult_getAsDouble.argtypes = [ctypes.c_void_p]
        lib.clang_EvalResult_getAsDouble.restype = ctypes.c_double
        lib.clang_EvalResult_getAsLongLong.argtypes = [ctypes.c_void_p]
        lib.clang_EvalResult_getAsLongLong.restype = ctypes.c_longlong
        lib.clang_EvalResult_dispose.argtypes = [ctypes.c_void_p]
        lib.clang_EvalResult_dispose.restype = None
        lib._torchclad_eval_ready = True
    return lib


_CALLEE = re.compile(r"^(::)?[A-Za-z_][\w:]*(<[\w\s:,*&<>]*>)?$")


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


def lower_source(source: str, filename: str = "kernel.cpp", extra_args: tuple = ()) -> ir.Module:
    """Parse and lower every function defined in the main file."""
    tu = parse(source, filename, extra_args)
    fn_cursors, custom_cursors, global_cursors = [], [], []

    def visit(parent, in_custom=False):
        for c in parent.get_children():
            if c.location.file is None or c.location.file.name != filename:
                continue
            if c.kind == K.NAMESPACE:
                visit(c, in_custom or c.spelling == "custom_derivatives")
            elif c.kind in (K.FUNCTION_DECL, K.FUNCTION_TEMPLATE) and c.is_definition():
                (custom_cursors if in_custom else fn_cursors).append(c)
            elif c.kind in (K.FUNCTION_DECL, K.FUNCTION_TEMPLATE) and in_custom:
                custom_cursors.append(c)
            elif c.kind == K.VAR_DECL and not in_custom:
                global_cursors.append(c)
            elif c.kind in (K.LINKAGE_SPEC,):
                visit(c, in_custom)

    visit(tu.cursor)
    marks = pragmas(source)
    declared = {}                  # functions declared (not defined) in the main file
    for c in tu.cursor.get_children():
        if c.kind in (K.FUNCTION_DECL, K.FUNCTION_TEMPLATE) and not c.is_definition() and \
                c.location.file is not None and c.location.file.name == filename:
            declared[c.spelling] = c
    names = dict(declared)
    names.update({c.spelling: c for c in fn_cursors})
    globals_: dict = {}
    gl = _Lowerer(filename, (), names)
    for g in global_cursors:
        t = gl.type_of(g.type, None)
        v = ir.Var(g.spelling, t, -len(globals_) - 1)
        globals_[g.spelling] = ir.Global(v, "")
    functions, customs, broken, signatures = {}, {}, {}, {}
    for c in fn_cursors + custom_cursors:
        template = tuple(x.spelling for x in c.get_children()
                         if x.kind == K.TEMPLATE_TYPE_PARAMETER)
        if any(x.kind in (K.TEMPLATE_NON_TYPE_PARAMETER, K.TEMPLATE_TEMPLATE_PARAMETER)
               for x in c.get_children()):
            raise DiffError(loc_of(c, filename), f"'{c.spelling}': only type template "
                            "parameters are supported")
        lw = _Lowerer(filename, template, names)
        lw.globals = {n: g.var for n, g in globals_.items()}
        lw.pragmas = marks
        if c in custom_cursors:
            params = []
            lw.push()
            for ch in c.get_children():
                if ch.kind == K.PARM_DECL:
                    params.append(ir.Var(ch.spelling, lw.type_of(ch.type), 0))
            customs[c.spelling] = ir.Function(c.spelling, tuple(params), ir.VOID, ir.Block(),
                                              template, loc_of(c, filename), True)
            continue
        sig = _Lowerer(filename, template, names)
        try:
            signatures[c.spelling] = tuple(
                ir.Var(ch.spelling, sig.type_of(ch.type), 0)
                for ch in c.get_children() if ch.kind == K.PARM_DECL)
        except DiffError:
            pass
        if c.spelling in functions or c.spelling in broken:
            broken[c.spelling] = DiffError(loc_of(c, filename), f"'{c.spelling}' is defined "
                                           "twice (overloads are not supported)")
            functions.pop(c.spelling, None)
            continue
        # a function the request never reaches must not stop it: keep the error for later
        try:
            functions[c.spelling] = lw.function(c)
        except DiffError as e:
            broken[c.spelling] = e
    return ir.Module(functions, customs, globals_, filename, broken, signatures)
