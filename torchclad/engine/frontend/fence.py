"""Fence: reject C++ the engine does not differentiate, before anything else looks at it.

Each entry names the construct and what to do instead; the message is prefixed with
file:line:col by `check`.
"""
from __future__ import annotations

import clang.cindex as ci

from ..errors import DiffError
from .parse import loc_of

K = ci.CursorKind

UNSUPPORTED = {
    K.GOTO_STMT: "goto is not supported in differentiated code; use structured loops and break",
    K.INDIRECT_GOTO_STMT: "computed goto is not supported in differentiated code",
    K.LABEL_STMT: "labels are not supported in differentiated code (no goto)",
    K.CXX_TRY_STMT: "exceptions (try/catch) are not supported in differentiated code",
    K.CXX_THROW_EXPR: "exceptions (throw) are not supported in differentiated code",
    K.LAMBDA_EXPR: "lambdas are not supported in differentiated code; write a free function",
    K.ASM_STMT: "inline assembly is not supported in differentiated code",
    K.CXX_TYPEID_EXPR: "typeid is not supported in differentiated code",
}


# C++ words for the constructs the lowering meets but does not take, so that a message names
# what the user wrote rather than a libclang cursor kind.
CPP_NAMES = {
    K.STRING_LITERAL: "a string literal",
    K.COMPOUND_LITERAL_EXPR: "a compound literal",
    K.PACK_EXPANSION_EXPR: "a pack expansion",
    K.SIZE_OF_PACK_EXPR: "sizeof...",
    K.ADDR_LABEL_EXPR: "a label address (&&label)",
    K.TYPEDEF_DECL: "a local typedef",
    K.TYPE_ALIAS_DECL: "a local using alias",
    K.STATIC_ASSERT: "static_assert",
    K.STRUCT_DECL: "a local struct",
    K.CLASS_DECL: "a local class",
    K.UNION_DECL: "a local union",
    K.ENUM_DECL: "a local enum",
    K.USING_DIRECTIVE: "using namespace",
    K.USING_DECLARATION: "a using declaration",
    K.NAMESPACE_ALIAS: "a namespace alias",
    K.FUNCTION_DECL: "a local function declaration",
    K.TEMPLATE_REF: "a class template used as a value (a function object such as "
                    "std::greater<double>())",
    K.CXX_TYPEID_EXPR: "typeid",
    K.CXX_THROW_EXPR: "throw",
    K.LAMBDA_EXPR: "a lambda",
    K.GNU_NULL_EXPR: "NULL",
}


def described(c, what: str) -> str:
    """The C++ name of the construct at cursor ``c``; else the ``what`` it is, quoted from
    the source (never a libclang cursor kind)."""
    name = CPP_NAMES.get(c.kind)
    if name:
        return name
    text = " ".join(t.spelling for t in c.get_tokens())
    if len(text) > 60:
        text = text[:57] + "..."
    return f"the {what} `{text}`" if text else f"this {what}"


def check(fn_cursor, filename: str) -> None:
    """Raise DiffError at the first unsupported construct in a function body."""
    if fn_cursor.kind == K.CXX_METHOD and (fn_cursor.is_virtual_method() or
                                           fn_cursor.semantic_parent.kind == K.CLASS_TEMPLATE):
        raise DiffError(loc_of(fn_cursor, filename),
                        f"'{fn_cursor.spelling}' is a virtual member function or one of a "
                        "class template; only free functions and non-virtual member functions "
                        "of plain classes are differentiated")
    for c in fn_cursor.walk_preorder():
        msg = UNSUPPORTED.get(c.kind)
        if msg:
            raise DiffError(loc_of(c, filename), msg)
        if c.kind == K.CALL_EXPR:
            ref = c.referenced
            if ref is not None and ref.kind == K.CXX_METHOD and not _taken_method(ref, filename):
                raise DiffError(loc_of(c, filename),
                                f"call to member function '{ref.spelling}' is not supported "
                                "(only a struct's copy assignment, static member functions of "
                                "library classes, and non-virtual member functions defined in "
                                "this source are)")
        if c.kind in (K.PARM_DECL, K.VAR_DECL):
            _check_container(c, filename)


def _taken_method(ref, filename: str) -> bool:
    """Member functions the lowering takes: a struct's implicit copy assignment, a static
    member function (`std::numeric_limits<double>::infinity()`), a non-virtual one defined
    in this source."""
    if ref.spelling == "operator=":
        return True
    in_file = ref.location.file is not None and ref.location.file.name == filename
    if ref.is_static_method():
        return True          # a plain call (its derivative, if needed, is a custom one)
    return in_file and not ref.is_virtual_method() and not ref.spelling.startswith("operator")


def _check_container(decl, filename: str) -> None:
    """A parameter or local that is a std::vector or std::array: refused with what to write
    instead (the lowering would otherwise meet its operator[] as a method call)."""
    t = decl.type
    while t.kind in (ci.TypeKind.LVALUEREFERENCE, ci.TypeKind.RVALUEREFERENCE,
                     ci.TypeKind.POINTER):
        t = t.get_pointee()
    if t.get_canonical().kind != ci.TypeKind.RECORD:
        return
    spelled = t.spelling.replace("const ", "")
    if "vector<" not in spelled and "array<" not in spelled:
        return
    what = "parameter" if decl.kind == K.PARM_DECL else "local"
    fix = ("pass arrays as pointers (const double* x) with their length as an int parameter"
           if decl.kind == K.PARM_DECL else
           "use a fixed-size local array (double t[16]) or a scratch array the caller passes in")
    raise DiffError(loc_of(decl, filename),
                    f"{what} '{decl.spelling}' is a {spelled}: std containers are not "
                    f"supported in differentiated code; {fix}")
