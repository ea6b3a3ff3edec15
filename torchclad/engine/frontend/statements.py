"""Lowering of statements and local declarations: one ``visit_<kind>`` per statement kind.

Expressions are lowered by :class:`~.expressions.Expressions`; the two halves meet in
:class:`~.lower.Lowerer`.
"""
from __future__ import annotations

import re
from dataclasses import replace

import clang.cindex as ci

from .. import ir, names
from . import fence
from .parse import binary_op, unary_op
from .scope import ASSIGN_OPS, TK, K, Scopes

_PLAIN_ASSIGN = ("=", "+=", "-=", "*=", "/=")
_INIT_LIST = re.compile(r"(const)?std::initializer_list<.*>(&&?)?")
_INCREMENTS = ("post++", "pre++", "post--", "pre--")
_CHECKPOINT = re.compile(r"torchclad\s+checkpoint((?:\s+(?:every|state)\s*\(.*?\))*)\s*")


class Statements(Scopes):
    """Statements, blocks, loops and their pragmas, local declarations, assignments."""

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
        """The IR statements of statement cursor ``c`` (side effects first)."""
        visit = self.visitor(c) if c.kind.is_statement() else None
        if visit is not None:
            return visit(c)
        if c.kind.is_expression() or c.kind == K.UNEXPOSED_STMT:
            pre, stmts = self.effects(lambda: self.expr_stmt(c))
            return pre + stmts
        self.err(c, f"{fence.described(c, 'statement')} is not supported in "
                    "differentiated code")

    # ------------------------------------------------------------------ simple statements
    def visit_compound_stmt(self, c) -> list:
        return [self.block(c)]

    def visit_decl_stmt(self, c) -> list:
        out = []
        for d in c.get_children():
            if d.kind == K.VAR_DECL:
                out.extend(self.declare(d))
            elif d.kind == K.STATIC_ASSERT:
                continue                      # checked by the compiler; no code
            else:
                self.err(d, f"{fence.described(d, 'declaration')} is not supported here")
        return out

    def visit_null_stmt(self, c) -> list:
        return []

    def visit_break_stmt(self, c) -> list:
        return [ir.Break(self.loc(c))]

    def visit_continue_stmt(self, c) -> list:
        return [ir.Continue(self.loc(c))]

    def visit_return_stmt(self, c) -> list:
        ch = list(c.get_children())
        if not ch:
            return [ir.Return(None, self.loc(c))]
        pre, value = self.effects(lambda: self.expr(ch[0]))
        if self.ret_type is not None and self.ret_type.ref:     # return x: its address
            value = self.undetached(value)
            if not isinstance(value, (ir.Index, ir.Member)) and \
                    not (isinstance(value, ir.Var) and not value.type.is_memory):
                self.err(c, "a function returning a reference returns a variable or an "
                            "element here; return a value instead")
            value = ir.Unary("&", value, self.ret_type)
        return pre + [ir.Return(value, self.loc(c))]

    def visit_if_stmt(self, c) -> list:
        # if (init; T v = e) then else  ->  { init; T v = e; if (v) then else }
        self.push()
        head, cond_c, rest = self.header(c)
        pre, cond = self.effects(lambda: self.expr(cond_c))
        then = self.as_block(rest[0])
        other = self.as_block(rest[1]) if len(rest) > 1 else ir.Block()
        self.pop()
        out = head + pre + [ir.If(cond, then, other, self.loc(c))]
        return [ir.Block(tuple(out), self.loc(c))] if head else out

    def header(self, c) -> tuple:
        """The parts of an if / switch / while header `(init; T v = e)`: (the statements of
        its init-statement and condition declaration, the condition cursor, the children
        after the header). Lowers the declarations into the current scope."""
        kids = list(c.get_children())
        close, semis = self.paren_header(c)
        if close is None:           # tokens of a macro: the condition is the first child
            head, rest = kids[:1], kids[1:]
        else:
            head = [k for k in kids if k.extent.start.offset < close]
            rest = kids[len(head):]
        out = []
        if semis:
            if head and head[0].extent.start.offset < semis[0]:
                out += self.stmt(head.pop(0))
            else:
                out += self.hidden_init(c, head, close)
        if head and head[0].kind == K.VAR_DECL:
            out += self.declare(head.pop(0))
        if not head:
            self.err(c, "could not read this statement's condition")
        return out, head[-1], rest

    def paren_header(self, c) -> tuple:
        """(offset of the `)` closing the header of c, offsets of the `;` at its top level);
        (None, []) when the tokens are not the statement's own (a macro expansion)."""
        depth, semis = 0, []
        toks = list(c.get_tokens())
        if not toks or toks[0].spelling not in ("if", "switch", "while"):
            return None, []
        for t in toks:
            if t.spelling == "(":
                depth += 1
            elif t.spelling == ")":
                depth -= 1
                if depth == 0:
                    return t.extent.start.offset, semis
            elif t.spelling == ";" and depth == 1:
                semis.append(t.extent.start.offset)
        return None, []

    def hidden_init(self, c, head, close) -> list:
        """The init-statement of a `switch (T v = e; v)`, which libclang does not list among
        the children: the declarations the condition names that lie inside the header."""
        start = c.extent.start.offset
        decls = {}
        for h in head:
            for x in h.walk_preorder():
                r = x.referenced if x.kind == K.DECL_REF_EXPR else None
                if r is not None and r.kind == K.VAR_DECL and \
                        start < r.extent.start.offset < close:
                    decls[r.extent.start.offset] = r
        if not decls:
            self.err(c, "the init-statement of this switch is not supported; write it as a "
                        "statement before the switch")
        out = []
        for _, d in sorted(decls.items()):
            out += self.declare(d)
        return out

    # ------------------------------------------------------------------ switch
    def visit_switch_stmt(self, c) -> list:
        self.push()
        head, cond_c, rest = self.header(c)
        pre, cond = self.effects(lambda: self.expr(cond_c))
        body = rest[-1]
        self.push()
        items = []
        for s in (body.get_children() if body.kind == K.COMPOUND_STMT else [body]):
            items.extend(self.case_items(s))
        self.pop()
        self.pop()
        out = head + pre + [ir.Switch(cond, ir.Block(tuple(items), self.loc(body)), self.loc(c))]
        return [ir.Block(tuple(out), self.loc(c))] if head else out

    def visit_case_stmt(self, c) -> list:
        self.err(c, "case label outside a switch body block is not supported")

    visit_default_stmt = visit_case_stmt

    def case_items(self, s) -> list:
        if s.kind == K.CASE_STMT:
            ch = list(s.get_children())
            return [ir.Case(self.expr(ch[0]), self.loc(s))] + self.case_items(ch[-1])
        if s.kind == K.DEFAULT_STMT:
            ch = list(s.get_children())
            return [ir.Case(None, self.loc(s))] + self.case_items(ch[-1])
        if s.kind == K.COMPOUND_STMT and any(x.kind in (K.CASE_STMT, K.DEFAULT_STMT)
                                             for x in s.walk_preorder()
                                             if x.kind != K.SWITCH_STMT):
            # a block holding case labels (`case 1: {... case 2: ...}`): its statements
            # join the switch's list (names are unique after lowering, so scopes can merge)
            return [x for k in s.get_children() for x in self.case_items(k)]
        return self.stmt(s)

    # ------------------------------------------------------------------ loops
    def visit_while_stmt(self, c) -> list:
        # while (T v = e) body  ->  for (;;) { T v = e; if (!v) break; body }
        self.push()
        head, cond_c, rest = self.header(c)
        pre, cond = self.effects(lambda: self.expr(cond_c))
        loop = self.loop_with_effects((), head + pre, cond, (), self.as_block(rest[-1]),
                                      self.loc(c))
        self.pop()
        return [loop]

    def visit_do_stmt(self, c) -> list:
        ch = list(c.get_children())
        body = self.as_block(ch[0])
        pre, cond = self.effects(lambda: self.expr(ch[1]))
        if not pre:
            return [ir.Loop((), cond, (), body, self.loc(c), do_while=True)]
        # do body while (--n)  ->  for (;;) { body; --n; if (!n) break; }
        if _continues(body.stmts):
            self.err(c, "a do-while whose condition has side effects (++, --) and whose "
                        "body has 'continue' is not supported; update the variable inside "
                        "the loop body")
        L = self.loc(c)
        test = ir.If(ir.Unary("!", cond, ir.BOOL), ir.Block((ir.Break(L),)))
        return [ir.Loop((), None, (), ir.Block(body.stmts + tuple(pre) + (test,), body.loc), L)]

    def visit_cxx_for_range_stmt(self, c) -> list:
        """for (T v : a) body, a a local array of N elements  ->
        for (int _i0 = 0; _i0 < N; ++_i0) { T v = a[_i0]; body }  (T& v binds a[_i0])"""
        kids = list(c.get_children())
        var_c, range_c, body_c = kids[0], kids[1], kids[-1]
        rng = self.expr(range_c)
        if not (isinstance(rng, ir.Var) and rng.type.dims):
            self.err(range_c, "range-based for over this range is not supported; loop over a "
                              "local array, or write an index loop")
        L = self.loc(c)
        self.push()
        k = self.temp(names.RANGE_INDEX, ir.INT)
        elem = ir.Index(rng, k, rng.type.element())
        t = self.type_of(var_c.type, var_c, allow_ref=True)
        if t.ref:
            v = self.new_var(var_c, var_c.spelling, replace(t, const=t.const or elem.type.const))
            head = ir.Decl(v, ir.Unary("&", elem, v.type), (), L)
        else:
            head = ir.Decl(self.new_var(var_c, var_c.spelling, t), elem, (), L)
        body = self.as_block(body_c)
        self.pop()
        return [ir.Loop((ir.Decl(k, ir.Const("0", ir.INT), (), L),),
                        ir.Binary("<", k, ir.Const(rng.type.dims[0], ir.INT), ir.BOOL),
                        (ir.Assign("+=", k, ir.Const("1", ir.INT), L),),
                        ir.Block((head,) + body.stmts, body.loc), L)]

    def visit_for_stmt(self, c) -> list:
        # a pragma on the line of several for statements belongs to the first (outermost)
        self.pragma_owner.setdefault(c.extent.start.line, c.extent.start.offset)
        parts = self.for_clauses(c)
        self.push()
        init = self.stmt(parts["init"]) if parts["init"] is not None else []
        pre = []
        if parts["cond_decl"] is not None:    # for (...; T v = e; ...)
            pre += self.declare(parts["cond_decl"])
        cpre, cond = self.effects(lambda: self.expr(parts["cond"])) \
            if parts["cond"] is not None else ([], None)
        pre += cpre
        inc = []
        if parts["inc"] is not None:
            ipre, inc = self.effects(lambda: self.expr_stmt(parts["inc"]))
            inc = ipre + inc
        body = self.as_block(list(c.get_children())[-1])
        self.pop()
        loop = self.loop_with_effects(tuple(init), pre, cond, tuple(inc), body, self.loc(c))
        return [self.with_pragma(c, loop)]

    def for_clauses(self, c) -> dict:
        """``{"init", "cond_decl", "cond", "inc"}`` -> the cursor of that clause, None when
        empty."""
        parts = {"init": None, "cond_decl": None, "cond": None, "inc": None}
        # libclang omits empty for-clauses; place each child by the ';' it precedes.
        depth, semis, close = 0, [], None
        for t in c.get_tokens():
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
        for ch in list(c.get_children())[:-1]:
            off = ch.extent.start.offset
            slot = "init" if off < semis[0] else ("cond" if off < semis[1] else "inc")
            if slot == "cond" and ch.kind == K.VAR_DECL:
                slot = "cond_decl"            # for (; T v = e; ): v, then the test of v
            parts[slot] = ch
        return parts

    def with_pragma(self, c, loop: ir.Loop) -> ir.Loop:
        """``loop`` carrying the omp / torchclad pragma written before for-statement ``c``."""
        pragma = self.pragmas.get(c.extent.start.line, "")
        if self.pragma_owner.get(c.extent.start.line, c.extent.start.offset) != \
                c.extent.start.offset:
            pragma = ""                   # a loop nested in the one the pragma is for
        if pragma:
            self.used_pragmas.add(c.extent.start.line)
        if pragma.startswith("torchclad"):
            return replace(loop, pragma=self.checkpoint_pragma(c, pragma))
        if pragma.startswith("omp"):
            words = pragma.split()
            if words[:3] == ["omp", "parallel", "for"] or words[:2] in (["omp", "for"],
                                                                          ["omp", "simd"]):
                return replace(loop, pragma=pragma)    # the reverse decides what it keeps
            self.err(c, f"'#pragma {pragma}' is not supported; only '#pragma omp parallel "
                        "for' (and 'omp simd') on a for loop are")
        return loop

    def checkpoint_pragma(self, c, pragma: str) -> str:
        """`torchclad checkpoint [every(K)] [state(a[s:n], ...)]`, checked, with the names in
        its clauses spelled as the lowered code spells them."""
        self.used_pragmas.add(c.extent.start.line)
        m = _CHECKPOINT.fullmatch(pragma)
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

    # ------------------------------------------------------------------ declarations
    def declare(self, d) -> list:
        """The statements of local declaration d: side effects of its initializer, the
        declaration, and for a struct the assignments of its fields."""
        pre, decl = self.effects(lambda: self.var_decl(d))
        return pre + (decl if isinstance(decl, list) else [decl])

    def var_decl(self, d):
        """The ir.Decl of local declaration d (for a struct: a list, see `record_decl`)."""
        if _INIT_LIST.match(re.sub(r"\s+", "", d.type.get_canonical().spelling)):
            return self.initializer_list(d)
        typ = self.type_of(d.type, d, allow_ref=True)
        if typ.ref:
            return self.reference_decl(d, typ)
        if typ.is_object:
            return self.record_decl(d, typ)
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

    def initializer_list(self, d) -> ir.Decl:
        """`auto&& r = {a, b, c}` (a std::initializer_list): a const local array."""
        lists = [x for x in d.walk_preorder() if x.kind == K.INIT_LIST_EXPR]
        if not lists or lists[0].type.kind != TK.CONSTANTARRAY:
            self.err(d, f"std::initializer_list '{d.spelling}' is only supported initialised "
                        "with a braced list; use a local array")
        t = self.type_of(lists[0].type.element_type, d)
        items = tuple(self.expr(x) for x in lists[0].get_children())
        v = self.new_var(d, d.spelling, ir.Type(t.base, 0, True, (str(len(items)),), t.real))
        return ir.Decl(v, None, items, self.loc(d))

    def reference_decl(self, d, typ: ir.Type) -> ir.Decl:
        """`T& r = x`: r holds the address of x (every use of r reads or writes x). A const
        reference to a value that is no variable or element (`const T& r = a * b`) is that
        value: a const local."""
        kids = [x for x in d.get_children() if x.kind.is_expression()]
        if not kids:
            self.err(d, f"reference '{d.spelling}' has no initializer")
        e = self.expr(kids[-1])
        self.no_value_temp(d, e)
        if d.storage_class == ci.StorageClass.STATIC:
            self.err(d, f"static reference '{d.spelling}' is not supported")
        if isinstance(e, (ir.Index, ir.Member)) or \
                (isinstance(e, ir.Var) and (not e.type.is_memory or e.type.is_object)):
            init = ir.Unary("&", e, replace(e.type, ptr=1, const=typ.const or e.type.const,
                                            dims=(), vector=False, ref=True))
            v = self.new_var(d, d.spelling, replace(typ, const=init.type.const))
            return ir.Decl(v, init, (), self.loc(d))
        v = self.new_var(d, d.spelling, replace(typ.element(), const=True))
        return ir.Decl(v, e, (), self.loc(d))

    # ------------------------------------------------------------------ expression statements
    def expr_stmt(self, c) -> list:
        """An expression used as a statement: assignments and increments become ir.Assign."""
        k = c.kind
        if k in (K.BINARY_OPERATOR, K.COMPOUND_ASSIGNMENT_OPERATOR):
            op = binary_op(c)
            ch = list(c.get_children())
            if op == ",":
                return self.expr_stmt(ch[0]) + self.expr_stmt(ch[1])
            if op in ASSIGN_OPS:
                return [self.assignment(c, op, ch[0], ch[1])]
        if k == K.UNARY_OPERATOR:
            op = unary_op(c)
            if op in _INCREMENTS:
                target = self.lvalue(next(c.get_children()))
                one = ir.Const("1", ir.INT)
                return [ir.Assign("+=" if "++" in op else "-=", target, one, self.loc(c))]
        if k == K.PAREN_EXPR or (k == K.UNEXPOSED_EXPR and len(list(c.get_children())) == 1):
            return self.expr_stmt(next(c.get_children()))
        if k in (K.CALL_EXPR,):
            copied = self.record_assignment(c)
            if copied is not None:
                return copied
            return [ir.ExprStmt(self.expr(c), self.loc(c))]
        if k in (K.CSTYLE_CAST_EXPR, K.CXX_STATIC_CAST_EXPR) and c.type.kind == TK.VOID:
            inner = [x for x in c.get_children() if x.kind.is_expression()]
            return self.expr_stmt(inner[-1]) if inner else []     # (void)f(x); is f(x);
        self.expr(c)                       # checked, but an expression without effect
        return []

    def assignment(self, c, op: str, lhs, rhs) -> ir.Assign:
        if op not in _PLAIN_ASSIGN:
            target = self.expr(lhs)
            if target.type.real:
                self.err(c, f"operator {op} on a floating value is not supported")
            return ir.Assign(op, target, self.expr(rhs), self.loc(c))
        return ir.Assign(op, self.lvalue(lhs), self.expr(rhs), self.loc(c))

    def lvalue(self, c) -> ir.Expr:
        self.lvalue_wanted = True
        e = self.undetached(self.expr(c))
        if not isinstance(e, (ir.Var, ir.Index, ir.Member)) and \
                not (isinstance(e, ir.Unary) and e.op == "*"):
            self.err(c, "assignment target must be a variable, an array element, a struct "
                        "member or *pointer")
        if isinstance(e, ir.Unary):
            return ir.Index(e.operand, ir.Const("0", ir.INT), e.type)
        return e


def _continues(stmts) -> bool:
    """Whether a `continue` among stmts (not in a nested loop) targets their loop."""
    for s in stmts:
        if isinstance(s, ir.Continue):
            return True
        if isinstance(s, ir.Block) and _continues(s.stmts):
            return True
        if isinstance(s, ir.If) and (_continues(s.then.stmts) or _continues(s.other.stmts)):
            return True
        if isinstance(s, ir.Switch) and _continues(s.body.stmts):
            return True
    return False
