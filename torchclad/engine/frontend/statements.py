"""Lowering of statements and local declarations: one ``visit_<kind>`` per statement kind.

Expressions are lowered by :class:`~.expressions.Expressions`; the two halves meet in
:class:`~.lower.Lowerer`.
"""
from __future__ import annotations

import re
from dataclasses import replace

import clang.cindex as ci

from .. import ir
from . import fence
from .parse import binary_op, unary_op
from .scope import ASSIGN_OPS, TK, K, Scopes

_PLAIN_ASSIGN = ("=", "+=", "-=", "*=", "/=")
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
        self.err(c, f"{fence.described(c.kind, 'statement')} is not supported in "
                    "differentiated code")

    # ------------------------------------------------------------------ simple statements
    def visit_compound_stmt(self, c) -> list:
        return [self.block(c)]

    def visit_decl_stmt(self, c) -> list:
        out = []
        for d in c.get_children():
            if d.kind == K.VAR_DECL:
                pre, decl = self.effects(lambda: self.var_decl(d))
                out.extend(pre + [decl])
            else:
                self.err(d, f"{fence.described(d.kind, 'declaration')} is not supported here")
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
        return pre + [ir.Return(value, self.loc(c))]

    def visit_if_stmt(self, c) -> list:
        ch = list(c.get_children())
        if any(x.kind == K.DECL_STMT or x.kind == K.VAR_DECL for x in ch):
            self.err(c, "declarations inside an if condition are not supported; declare "
                        "the variable before the if")
        pre, cond = self.effects(lambda: self.expr(ch[0]))
        then = self.as_block(ch[1])
        other = self.as_block(ch[2]) if len(ch) > 2 else ir.Block()
        return pre + [ir.If(cond, then, other, self.loc(c))]

    # ------------------------------------------------------------------ switch
    def visit_switch_stmt(self, c) -> list:
        ch = list(c.get_children())
        pre, cond = self.effects(lambda: self.expr(ch[0]))
        body = ch[-1]
        self.push()
        items = []
        for s in (body.get_children() if body.kind == K.COMPOUND_STMT else [body]):
            items.extend(self.case_items(s))
        self.pop()
        return pre + [ir.Switch(cond, ir.Block(tuple(items), self.loc(body)), self.loc(c))]

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
        return self.stmt(s)

    # ------------------------------------------------------------------ loops
    def visit_while_stmt(self, c) -> list:
        ch = list(c.get_children())
        if ch[0].kind in (K.VAR_DECL, K.DECL_STMT):
            self.err(c, "declarations inside a while condition are not supported")
        pre, cond = self.effects(lambda: self.expr(ch[0]))
        return [self.loop_with_effects((), pre, cond, (), self.as_block(ch[1]), self.loc(c))]

    def visit_do_stmt(self, c) -> list:
        ch = list(c.get_children())
        pre, cond = self.effects(lambda: self.expr(ch[1]))
        if pre:
            self.err(c, "a do-while condition with side effects (++, --) is not "
                        "supported; update the variable inside the loop body")
        return [ir.Loop((), cond, (), self.as_block(ch[0]), self.loc(c), do_while=True)]

    def visit_for_stmt(self, c) -> list:
        parts = self.for_clauses(c)
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
        body = self.as_block(list(c.get_children())[-1])
        self.pop()
        loop = self.loop_with_effects(tuple(init), pre, cond, tuple(inc), body, self.loc(c))
        return [self.with_pragma(c, loop)]

    def for_clauses(self, c) -> dict:
        """``{"init", "cond", "inc"}`` -> the cursor of that clause, None when empty."""
        parts = {"init": None, "cond": None, "inc": None}
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
            parts[slot] = ch
        return parts

    def with_pragma(self, c, loop: ir.Loop) -> ir.Loop:
        """``loop`` carrying the omp / torchclad pragma written before for-statement ``c``."""
        pragma = self.pragmas.get(c.extent.start.line, "")
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
        e = self.expr(c)
        if not isinstance(e, (ir.Var, ir.Index)) and not (isinstance(e, ir.Unary) and e.op == "*"):
            self.err(c, "assignment target must be a variable, an array element or *pointer")
        if isinstance(e, ir.Unary):
            return ir.Index(e.operand, ir.Const("0", ir.INT), e.type)
        return e

