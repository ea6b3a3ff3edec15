"""The engine's IR nodes: small frozen dataclasses, no libclang cursors.

Expressions carry a `Type`; statements carry a source `Loc` for diagnostics.
The same node set is used for the primal (after lowering) and for the generated
derivative, plus a few tape nodes that only the reverse transform creates.
"""
from __future__ import annotations


from dataclasses import dataclass, field, replace
from typing import Union

from ..errors import Loc, NOLOC

@dataclass(frozen=True, slots=True)
class Type:
    base: str                 # scalar spelling: "double", "T", "int", "bool", "void"
    ptr: int = 0              # pointer depth
    const: bool = False       # const on the scalar (pointee for pointers)
    dims: tuple = ()          # fixed array dims of a local array, as C++ text
    real: bool = False        # floating base (or template scalar parameter)
    vector: bool = False      # a std::vector of base, sized at run time (generated only)
    ref: bool = False         # a C++ reference `T&` (ptr == 1: the IR holds its address)
    record: bool = False      # a struct / class: base is its name; real if it has a float
    fields: tuple = ()        # of a record: ((name, Type), ...) in declaration order

    @property
    def is_pointer(self) -> bool:
        return self.ptr > 0

    @property
    def is_array(self) -> bool:
        return bool(self.dims)

    @property
    def is_real_scalar(self) -> bool:
        return self.real and self.ptr == 0 and not self.dims and not self.record

    @property
    def is_memory(self) -> bool:
        """Pointer, array, vector or struct object: names memory rather than holding a
        value (a struct is a small block of memory whose elements are its fields)."""
        return self.ptr > 0 or bool(self.dims) or self.vector or self.record

    @property
    def is_object(self) -> bool:
        """A struct value (not a pointer to one, nor an array of them)."""
        return self.record and self.ptr == 0 and not self.dims

    def field(self, name: str) -> "Type":
        for n, t in self.fields:
            if n == name:
                return t
        raise KeyError(f"{self.base} has no field {name}")

    def element(self) -> "Type":
        if self.dims:
            return replace(self, dims=self.dims[1:])
        if self.vector:
            return replace(self, vector=False)
        if self.ptr:
            return replace(self, ptr=self.ptr - 1, ref=False)
        raise TypeError(f"{self} is not indexable")

    def pointer_to(self) -> "Type":
        return replace(self, ptr=self.ptr + 1, ref=False)

    def value(self) -> "Type":
        """The type of a plain local that can hold this value (const dropped; a reference's
        is the pointer the IR holds)."""
        if self.ref:
            return replace(self, ref=False)
        return replace(self, const=False) if not self.ptr else self

    def spell(self, name: str = "", *, scalar: str | None = None, template: tuple = ()) -> str:
        base = self.base
        if scalar is not None and base in template:
            base = scalar
        if self.vector:
            base = f"std::vector<{base}>"
        s = ("const " if self.const else "") + base + ("&" if self.ref else "*" * self.ptr)
        if name:
            s += " " + name
        for d in self.dims:
            s += f"[{d}]"
        return s

    def __str__(self) -> str:
        return self.spell()


BOOL = Type("bool")
INT = Type("int")
LONG = Type("long")
VOID = Type("void")
DOUBLE = Type("double", real=True)


# ----------------------------------------------------------------------------- expressions
@dataclass(frozen=True, slots=True)
class Var:
    name: str
    type: Type
    uid: int = 0              # identity for analyses; names are unique per function after lowering


@dataclass(frozen=True, slots=True)
class Const:
    text: str
    type: Type


@dataclass(frozen=True, slots=True)
class Index:
    base: "Expr"
    index: "Expr"
    type: Type


@dataclass(frozen=True, slots=True)
class Unary:
    op: str                   # "-", "+", "!", "~", "*" (deref), "&" (address-of)
    operand: "Expr"
    type: Type


@dataclass(frozen=True, slots=True)
class Binary:
    op: str                   # + - * / % < > <= >= == != && || & | ^ << >>
    lhs: "Expr"
    rhs: "Expr"
    type: Type


@dataclass(frozen=True, slots=True)
class Call:
    fn: str                   # as spelled, qualified: "std::tanh", "tanhf", "helper"
    args: tuple
    type: Type
    user: bool = False        # a function defined in the source (differentiated recursively)
    method: str = ""          # a member function call: its name; args[0] points at the object


@dataclass(frozen=True, slots=True)
class Member:
    """`base.name`: a field of the struct object `base` (`p->x` is Member(*p, x))."""
    base: "Expr"
    name: str
    type: Type


@dataclass(frozen=True, slots=True)
class Cond:
    cond: "Expr"
    then: "Expr"
    other: "Expr"
    type: Type


@dataclass(frozen=True, slots=True)
class Cast:
    operand: "Expr"
    type: Type
    style: str = "c"          # "c" -> (T)x, "fn" -> T(x)


@dataclass(frozen=True, slots=True)
class TapePop:
    """Generated only: the value last pushed on the tape."""
    type: Type


@dataclass(frozen=True, slots=True)
class Raw:
    """Generated only: an expression spelled from a template (rule pullbacks, the condition
    of a reversed loop). ``text`` spells the IR values it uses only as placeholders ``{k}``
    for ``reads[k]``; its other identifiers name functions. So passes see every value it
    uses in ``reads`` and never read the text back."""
    text: str
    type: Type
    reads: tuple = ()         # sub-expressions it spells, for printers and analyses
    assigns: bool = False     # the text steps its first read (`{0}--`, `({0} -= {1})`)


Expr = Union[Var, Const, Index, Member, Unary, Binary, Call, Cond, Cast, TapePop, Raw]


# ----------------------------------------------------------------------------- statements
@dataclass(frozen=True, slots=True)
class Decl:
    var: Var
    init: "Expr | None" = None
    init_list: tuple = ()     # array initializer elements
    loc: Loc = NOLOC
    static: bool = False


@dataclass(frozen=True, slots=True)
class Assign:
    op: str                   # "=", "+=", "-=", "*=", "/="
    target: "Expr"            # Var, Index or Unary("*")
    value: "Expr"
    loc: Loc = NOLOC


@dataclass(frozen=True, slots=True)
class ExprStmt:
    expr: "Expr"              # a call whose result is unused
    loc: Loc = NOLOC


@dataclass(frozen=True, slots=True)
class Block:
    stmts: tuple = ()
    loc: Loc = NOLOC


@dataclass(frozen=True, slots=True)
class If:
    cond: "Expr"
    then: Block
    other: Block = Block()
    loc: Loc = NOLOC


@dataclass(frozen=True, slots=True)
class Loop:
    """for (init; cond; inc) body. `while` has empty init/inc; cond None = forever."""
    init: tuple
    cond: "Expr | None"
    inc: tuple
    body: Block
    loc: Loc = NOLOC
    pragma: str = ""          # e.g. "omp parallel for"
    do_while: bool = False


@dataclass(frozen=True, slots=True)
class Switch:
    cond: "Expr"
    body: Block               # contains Case markers among its statements
    loc: Loc = NOLOC


@dataclass(frozen=True, slots=True)
class Case:
    value: "Expr | None"      # None = default
    loc: Loc = NOLOC


@dataclass(frozen=True, slots=True)
class Break:
    loc: Loc = NOLOC


@dataclass(frozen=True, slots=True)
class Continue:
    loc: Loc = NOLOC


@dataclass(frozen=True, slots=True)
class Return:
    value: "Expr | None" = None
    loc: Loc = NOLOC


@dataclass(frozen=True, slots=True)
class TapePush:
    value: "Expr"
    loc: Loc = NOLOC


@dataclass(frozen=True, slots=True)
class TapeArray:
    """push_array / pop_array of `count` elements from `data`: a local array or vector (its
    variable), or a section of memory (`p + start`)."""
    data: "Expr"
    count: "Expr"
    pop: bool
    loc: Loc = NOLOC

    @property
    def var(self) -> Var:
        """The variable whose memory is saved or restored."""
        return root_var(self.data)


@dataclass(frozen=True, slots=True)
class VectorDecl:
    """Generated only: `std::vector<T> var(count);` (var.type.vector), per-iteration storage."""
    var: Var
    count: "Expr"
    loc: Loc = NOLOC


@dataclass(frozen=True, slots=True)
class Comment:
    text: str
    loc: Loc = NOLOC


Stmt = Union[Decl, Assign, ExprStmt, Block, If, Loop, Switch, Case, Break, Continue, Return,
             TapePush, TapeArray, VectorDecl, Comment]


# ----------------------------------------------------------------------------- functions
@dataclass(frozen=True, slots=True)
class Function:
    name: str
    params: tuple             # of Var
    ret: Type
    body: Block
    template: tuple = ()      # template type parameter names
    loc: Loc = NOLOC
    custom: bool = False      # defined in clad::custom_derivatives
    source_names: tuple = ()  # parameter names as written (params may be renamed)
    write_once: tuple = ()    # uids of pointer params marked TORCHCLAD_WRITE_ONCE


@dataclass(frozen=True, slots=True)
class Global:
    """A namespace-scope variable the user's translation unit declares."""
    var: Var


@dataclass(frozen=True, slots=True)
class Module:
    functions: dict = field(default_factory=dict)     # name -> Function (user functions)
    customs: dict = field(default_factory=dict)       # pullback name -> Function (signature)
    globals: dict = field(default_factory=dict)       # name -> Global
    filename: str = "<source>"
    broken: dict = field(default_factory=dict)        # name -> DiffError met while lowering
    signatures: dict = field(default_factory=dict)    # name -> params (Vars) of every function
    custom_bodies: dict = field(default_factory=dict)  # custom derivative name -> its Function


# ----------------------------------------------------------------------------- roots
def root_var(e) -> "Var | None":
    """The variable a memory expression is based on: p in p[i], *(p+1), p + k, &a[i]."""
    while True:
        if isinstance(e, Var):
            return e
        if isinstance(e, (Index, Member)):
            e = e.base
        elif isinstance(e, Unary) and e.op in ("*", "&", "+"):
            e = e.operand
        elif isinstance(e, Binary) and e.op in ("+", "-"):
            e = e.lhs if (e.lhs.type.is_memory) else e.rhs
        elif isinstance(e, Cast) and e.type.is_pointer:
            e = e.operand
        elif isinstance(e, Cond):
            # c ? p : nullptr, or two pointers into the same array
            sides = [x for x in (e.then, e.other) if not is_null(x)]
            roots = {id(r): r for r in (root_var(x) for x in sides)}
            rs = list(roots.values())
            if len(rs) == 1 or (len(rs) == 2 and rs[0] == rs[1]):
                return rs[0]
            return None
        else:
            return None


def is_null(e) -> bool:
    while isinstance(e, Cast):
        e = e.operand
    return isinstance(e, Const) and e.text in ("nullptr", "NULL", "0")
