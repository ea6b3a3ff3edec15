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
    K.MEMBER_REF_EXPR: "struct/class members are not supported; pass arrays and scalars",
    K.CXX_NEW_EXPR: "new is not supported in differentiated code; pass preallocated buffers",
    K.CXX_DELETE_EXPR: "delete is not supported in differentiated code",
    K.CXX_FOR_RANGE_STMT: "range-based for is not supported; use an index loop",
    K.ASM_STMT: "inline assembly is not supported in differentiated code",
    K.CXX_TYPEID_EXPR: "typeid is not supported in differentiated code",
    K.CXX_THIS_EXPR: "member functions are not supported; write a free function",
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
}


def described(kind, what: str) -> str:
    """The C++ name of a construct of cursor ``kind``; else "<what> of kind <KIND>"."""
    return CPP_NAMES.get(kind) or f"{what} of kind {kind.name}"


def check(fn_cursor, filename: str) -> None:
    """Raise DiffError at the first unsupported construct in a function body."""
    if fn_cursor.kind == K.CXX_METHOD or fn_cursor.semantic_parent.kind in (
            K.CLASS_DECL, K.STRUCT_DECL, K.CLASS_TEMPLATE):
        raise DiffError(loc_of(fn_cursor, filename),
                        f"'{fn_cursor.spelling}' is a member function; only free functions "
                        "are differentiated (virtual calls and methods are not supported)")
    for c in fn_cursor.walk_preorder():
        msg = UNSUPPORTED.get(c.kind)
        if msg:
            raise DiffError(loc_of(c, filename), msg)
        if c.kind == K.CALL_EXPR:
            ref = c.referenced
            if ref is not None and ref.kind == K.CXX_METHOD:
                raise DiffError(loc_of(c, filename),
                                f"call to member function '{ref.spelling}' is not supported "
                                "(no classes or virtual calls in differentiated code)")
        if c.kind in (K.PARM_DECL, K.VAR_DECL):
            _check_class_type(c, filename)
        if c.kind == K.PARM_DECL and c.type.kind in (ci.TypeKind.LVALUEREFERENCE,
                                                     ci.TypeKind.RVALUEREFERENCE):
            raise DiffError(loc_of(c, filename),
                            f"reference parameter '{c.spelling}' is not supported; pass a pointer")


def _check_class_type(decl, filename: str) -> None:
    """A parameter or local of class type (std::vector, std::array, a struct): refused with what
    to write instead (the lowering would otherwise meet its operator[] as a method call)."""
    t = decl.type
    while t.kind in (ci.TypeKind.LVALUEREFERENCE, ci.TypeKind.RVALUEREFERENCE,
                     ci.TypeKind.POINTER):
        t = t.get_pointee()
    if t.get_canonical().kind != ci.TypeKind.RECORD or "lambda" in t.spelling:
        return  # (a lambda gets its own message)
    spelled = t.spelling.replace("const ", "")
    what = "parameter" if decl.kind == K.PARM_DECL else "local"
    if "vector<" in spelled or "array<" in spelled:
        fix = ("pass arrays as pointers (const double* x) with their length as an int "
               "parameter" if decl.kind == K.PARM_DECL else
               "use a fixed-size local array (double t[16]) or a scratch array the caller "
               "passes in")
        raise DiffError(loc_of(decl, filename),
                        f"{what} '{decl.spelling}' is a {spelled}: std containers are not "
                        f"supported in differentiated code; {fix}")
    raise DiffError(loc_of(decl, filename),
                    f"{what} '{decl.spelling}' has class type {spelled}: classes and structs "
                    "are not supported in differentiated code; pass arrays and scalars")
