"""Lowering of structs and classes with data members: their types, field accesses, and the
statements that build and copy them.

A struct object is memory whose elements are its fields (`ir.Member`); everything that
builds or copies a whole object is lowered field by field, so the rest of the engine only
ever reads and writes fields: `T t{a, b}` is `T t{}; t.x = a; t.y = b;`, a simple
constructor (member initializers, empty body) is inlined the same way, and `t = u` copies
each field. Member functions, base classes and pointer or reference members are refused
here with what to write instead.
"""
from __future__ import annotations

from .. import ir, names
from .literals import evaluate_int
from .scope import TK, K, Scopes, unwrapped


class Records(Scopes):
    """Struct types, `a.x` / `p->x`, and the construction and copy of struct objects."""

    # ------------------------------------------------------------------ types
    def record_type(self, t, c, spelling: str, ptr: int, dims, const: bool) -> ir.Type:
        """The IR type of a struct / class type (``t`` canonical) used by declaration ``c``."""
        decl = t.get_declaration()
        where = c if c is not None else decl
        name = spelling.removeprefix("struct ").removeprefix("class ").strip()
        if decl.kind == K.UNION_DECL:
            self.err(where, f"union '{name}' is not supported; use a struct")
        fields = []
        for f in decl.get_children():
            if f.kind == K.CXX_BASE_SPECIFIER:
                self.err(where, f"'{name}' derives from another class; only structs and "
                                "classes without base classes are supported")
            if f.kind == K.CXX_METHOD and f.is_virtual_method():
                self.err(where, f"'{name}' has virtual member functions; only non-virtual "
                                "ones are supported")
        # the type's own fields: a class template's instantiation (`box<float>`) has none
        # among its declaration's children
        for f in t.get_fields():
            ft = f.type
            if ft.kind in (TK.POINTER, TK.LVALUEREFERENCE, TK.RVALUEREFERENCE):
                self.err(where, f"'{name}' has a pointer or reference member '{f.spelling}'; "
                                "only structs of numbers (and of such structs) are supported: "
                                "keep the pointer outside the struct")
            if f.is_bitfield():
                self.err(where, f"'{name}' has a bit-field '{f.spelling}'")
            sub = self.type_of(ft, f)
            if sub.dims:
                self.err(where, f"'{name}' has an array member '{f.spelling}'; only structs "
                                "of numbers (and of such structs) are supported")
            fields.append((f.spelling, sub))
        ctors = [x for x in decl.get_children() if x.kind == K.CONSTRUCTOR]
        if ctors and not any(x.is_default_constructor() for x in ctors):
            self.err(where, f"'{name}' has no default constructor; the derivative declares "
                            "zeroed adjoint objects of it: give it one (`{name}() = default;`)")
        real = any(ft.real for _, ft in fields)
        return ir.Type(name, ptr, const, tuple(dims), real, record=True, fields=tuple(fields))

    # ------------------------------------------------------------------ a.x, p->x
    def visit_member_ref_expr(self, c) -> ir.Expr:
        ref = c.referenced
        if ref is not None and ref.kind == K.CXX_METHOD:
            self.err(c, f"member function '{c.spelling}' used as a value is not supported")
        kids = [x for x in c.get_children() if x.kind.is_expression()]
        if not kids:
            if self.this_obj is None:
                self.err(c, f"member '{c.spelling}' of an object this function does not see")
            base = self.this_obj
        else:
            base = self.expr(kids[0])
        if base.type.ptr and not base.type.ref:
            base = ir.Unary("*", base, base.type.element())        # p->x is (*p).x
        if not base.type.is_object:
            self.err(c, f"member '{c.spelling}' of something that is not a struct object")
        if ref is not None and ref.kind == K.VAR_DECL:
            self.err(c, f"static data member '{c.spelling}' is not supported")
        t = base.type.field(c.spelling)
        if base.type.const:
            t = ir.Type(t.base, t.ptr, True, t.dims, t.real, t.vector, t.ref, t.record, t.fields)
        m = ir.Member(base, c.spelling, t)
        return self.detached(m) if self.nondiff(ref) else m

    # ------------------------------------------------------------------ building objects
    def record_decl(self, d, typ: ir.Type) -> list:
        """`T t...;`: the declaration, then the statements that give its fields their values."""
        kids = [x for x in d.get_children() if x.kind.is_expression()]
        v = self.new_var(d, d.spelling, typ)
        out = [ir.Decl(v, None, (), self.loc(d))]
        return out + self.construct(v, typ, kids[-1] if kids else None, d)

    def construct(self, obj, t: ir.Type, init, where) -> list:
        """Statements giving the fields of object `obj` (of type t) the values initializer
        cursor `init` gives them (None: the default member initializers)."""
        init = unwrapped(init)
        L = self.loc(where)
        if init is None:
            return self.defaults(obj, t, where)
        if init.kind == K.INIT_LIST_EXPR:
            items = list(init.get_children())
            out = []
            for k, (name, ft) in enumerate(t.fields):
                m = ir.Member(obj, name, ft)
                if k >= len(items):
                    out += self.default_of(m, ft, self.field_cursor(t, name), where)
                elif ft.is_object:
                    out += self.construct(m, ft, items[k], where)
                else:
                    out.append(ir.Assign("=", m, self.expr(items[k]), L))
            return out
        ctor = init.referenced if init.kind == K.CALL_EXPR else None
        args = [x for x in init.get_children() if x.kind.is_expression()]
        if ctor is not None and ctor.kind == K.CONSTRUCTOR:
            if ctor.is_copy_constructor() or ctor.is_move_constructor():
                return self.copy_object(obj, self.expr(args[0]), t, L)
            return self.inline_constructor(obj, t, ctor.get_definition() or ctor, args, where)
        if init.type.get_canonical().kind == TK.RECORD:
            return self.copy_object(obj, self.expr(init), t, L)
        self.err(init, f"this initializer of a '{t.base}' is not supported")

    def defaults(self, obj, t: ir.Type, where) -> list:
        out = []
        for name, ft in t.fields:
            out += self.default_of(ir.Member(obj, name, ft), ft, self.field_cursor(t, name),
                                   where)
        return out

    def default_of(self, m, ft: ir.Type, fc, where) -> list:
        """A field's default member initializer (`double y = 2;`), if it has one."""
        init = [x for x in fc.get_children() if x.kind.is_expression()] if fc else []
        if ft.is_object:
            return self.construct(m, ft, init[-1] if init else None, where)
        if init:
            return [ir.Assign("=", m, self.expr(init[-1]), self.loc(where))]
        return []

    def field_cursor(self, t: ir.Type, name: str):
        decl = self.record_decls.get(t.base)
        if decl is None:
            return None
        return next((f for f in decl.get_children()
                     if f.kind == K.FIELD_DECL and f.spelling == name), None)

    def inline_constructor(self, obj, t: ir.Type, ctor, args, where) -> list:
        """A constructor whose body is empty: its parameters become locals initialised with
        the arguments, its member initializers field assignments."""
        kids = list(ctor.get_children())
        body = [x for x in kids if x.kind == K.COMPOUND_STMT]
        if body and any(True for _ in body[0].get_children()):
            self.err(where, f"constructor of '{t.base}' has a body; only constructors with "
                            "member initializers and an empty body are supported")
        params = [x for x in kids if x.kind == K.PARM_DECL]
        if len(params) != len(args):
            self.err(where, f"constructor of '{t.base}' called with default arguments is not "
                            "supported")
        out = []
        inits = {}
        for k, x in enumerate(kids):
            if x.kind == K.MEMBER_REF and k + 1 < len(kids) and kids[k + 1].kind.is_expression():
                inits[x.spelling] = kids[k + 1]
        self.push()
        saved, self.this_obj = self.this_obj, obj
        try:
            for p, a in zip(params, args):
                e = self.expr(a)
                v = self.new_var(p, p.spelling, self.type_of(p.type, p, allow_ref=True))
                if v.type.ref:
                    out.append(ir.Decl(v, ir.Unary("&", e, v.type), (), self.loc(where)))
                else:
                    out.append(ir.Decl(v, e, (), self.loc(where)))
            for name, ft in t.fields:
                m = ir.Member(obj, name, ft)
                if name in inits:
                    if ft.is_object:
                        out += self.construct(m, ft, inits[name], where)
                    else:
                        out.append(ir.Assign("=", m, self.expr(inits[name]), self.loc(where)))
                else:
                    out += self.default_of(m, ft, self.field_cursor(t, name), where)
        finally:
            self.this_obj = saved
            self.pop()
        return out

    def copy_object(self, dst, src, t: ir.Type, L) -> list:
        """`dst = src` for struct objects: field by field."""
        out = []
        for name, ft in t.fields:
            a, b = ir.Member(dst, name, ft), ir.Member(src, name, ft)
            out += self.copy_object(a, b, ft, L) if ft.is_object else [ir.Assign("=", a, b, L)]
        return out

    # ------------------------------------------------------------------ new / delete
    def visit_cxx_new_expr(self, c) -> ir.Expr:
        """`new T(e)`, `new T{...}`, `new T[N]{...}` with N a constant, released by a delete
        in the same function: a local array of N elements (`T _new0[N] = {...}`), which the
        reverse sweep can still read after the forward's delete."""
        if self.pre is None:
            self.err(c, "new inside a conditionally evaluated expression is not supported")
        toks = [t.spelling for t in c.get_tokens()]
        kids = [x for x in c.get_children() if x.kind.is_expression()]
        opener = next((t for t in toks[1:] if t in ("[", "(", "{")), "")
        t = self.type_of(c.type.get_pointee(), c)
        count, init = 1, kids[-1] if kids else None
        if opener == "[":
            n = self.constant(kids[0]) if kids else None
            if n is None or n < 1:
                self.err(c, "new[] with a size known only at run time is not supported; use "
                            "a local array of a fixed size, or a buffer passed in")
            count, init = n, kids[1] if len(kids) > 1 else None
        if t.ptr or t.dims:
            self.err(c, "new of a pointer or an array type is not supported")
        buf = self.temp(names.NEW_BUFFER, ir.Type(t.base, 0, False, (str(count),), t.real,
                                                    record=t.record, fields=t.fields))
        L = self.loc(c)
        if t.record:
            self.pre.append(ir.Decl(buf, None, (ir.Const("{}", buf.type),), L))
            if init is not None:
                self.pre.extend(self.construct(ir.Index(buf, ir.Const("0", ir.INT), t),
                                               t, init, c))
            return buf
        items = ()
        if init is not None and init.kind == K.INIT_LIST_EXPR:
            items = tuple(self.expr(x) for x in init.get_children())
        elif init is not None:
            items = (self.expr(init),)
        self.pre.append(ir.Decl(buf, None, items or (ir.Const("{}", buf.type),), L))
        return buf

    def visit_cxx_delete_expr(self, c) -> ir.Expr:
        """delete p: the memory of a `new` is a local array that ends with its scope."""
        return ir.Const("0", ir.INT)

    def constant(self, c) -> "int | None":
        return evaluate_int(c)

    def record_assignment(self, c) -> "list | None":
        """`t = u` between struct objects (the implicit copy assignment), field by field;
        None when c is not one."""
        ref = c.referenced
        if c.kind != K.CALL_EXPR or ref is None or ref.spelling != "operator=" or \
                ref.kind != K.CXX_METHOD:
            return None
        if ref.is_definition() and not ref.is_default_method():
            self.err(c, "a user-defined operator= is not supported")
        kids = [x for x in c.get_children() if x.kind.is_expression()]
        dst, src = self.expr(kids[0]), self.expr(kids[-1])
        return self.copy_object(dst, src, dst.type, self.loc(c))
