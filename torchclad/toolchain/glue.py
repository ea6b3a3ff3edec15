"""pybind11 glue for generated derivatives (used by the JIT cache and the AOT build of ``_C``).

For each :class:`~torchclad.engine.Derivative` ``d`` and each scalar type (``float`` and ``double``
for a template, the declared floating type otherwise; suffix ``f32`` / ``f64``) the module gets

- ``{name}_{sfx}``                 the primal,
- ``{name}_pullback_{sfx}``        combined mode: ``(params..., [_d_y,] adjoints...)`` where the
                                   adjoints follow ``Derivative.adjoints`` (``wrt``, then the
                                   output arrays of a void kernel),
- ``{name}_grad_{sfx}``            only for a non-void primal,
- ``{name}_reverse_forw_{sfx}``    split mode, forward part, records on a ``Tape``,
- ``{name}_reverse_sweep_{sfx}``   split mode, reverse part, consumes the ``Tape``,

and, where the Derivative has them (``Derivative.kinds``), the assigning sweep
``{name}_reverse_sweep_assign_{sfx}`` (:data:`torchclad.engine.names.PULLBACK_ASSIGN`) and
forward mode's

- ``{name}_pushforward_{sfx}``     ``(params..., tangents...)`` with a tangent for each of
                                   ``Derivative.tangents`` (a number for a scalar parameter, an
                                   address for an array); returns ``(value, tangent)`` for a
                                   non-void primal,
- ``{name}_darg_{sfx}``            ``f_darg<k>(params...)``, ``k`` = ``Derivative.darg``,
- ``{name}_pullback_pushforward_{sfx}``  forward over reverse: the pullback's arguments, then
                                   a tangent for each index of ``Derivative.second_mask`` into
                                   them (numbers for scalars, addresses for arrays and
                                   adjoints),

and the module binds ``torchclad::Tape`` as ``Tape`` (``size_bytes()``, ``empty()``,
``clear()``), module-local so that several modules can each bind it.

Calling convention from Python: pointer parameters and every adjoint (``_d_p``, which is a
pointer in C++ even for a scalar ``p``) are integer addresses (``tensor.data_ptr()``); scalars
are numbers; the seed ``_d_y`` of a non-void function is a number; the tape is a ``Tape``. Every
binding releases the GIL while the C++ code runs.

The glue only refers to names; it does not include the runtime: the translation unit it is
compiled with (``Derivative.translation_unit()``) includes ``<torchclad/runtime.h>``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

__all__ = [
    "GlueError",
    "TranslationUnit",
    "make_tu",
    "scalar_types",
    "adjoint_names",
    "bind_function_name",
    "bindings",
    "module_init",
    "jit_glue",
    "Slot",
    "Call",
    "calls",
    "SUFFIX",
    "binding_name",
    "identifier",
]

#: the suffix of a binding's name for each scalar type
SUFFIX = {"float": "f32", "double": "f64"}


def _names():
    """:mod:`torchclad.engine.names`, imported on first use: importing it loads the engine
    package (libclang bindings), which a module that only uses built-in kernels never needs."""
    from torchclad.engine import names

    return names


def binding_name(name: str, kind: str, scalar: str) -> str:
    """The module attribute that binds ``name``'s function of ``kind`` for ``scalar``.

    ``kind`` is ``""`` for the primal or one of :data:`torchclad.engine.names.KINDS`;
    ``scalar`` is ``"float"`` or ``"double"``: ``binding_name("f", "pullback", "double")`` is
    ``"f_pullback_f64"``.
    """
    stem = _names().generated(name, kind) if kind else name
    return f"{stem}_{SUFFIX[scalar]}"


def identifier(s: str) -> str:
    """``s`` as a C/Python identifier: every character but ASCII letters, digits and ``_``
    becomes ``_``, and a leading digit (or an empty ``s``) gets a ``_`` prefix."""
    out = re.sub(r"\W", "_", s, flags=re.ASCII)
    return out if out and not out[0].isdigit() else "_" + out


class GlueError(ValueError):
    """The derivatives cannot be bound (unsupported signature, mixed sources, ...)."""


@dataclass(frozen=True)
class TranslationUnit:
    """One C++ source and the derivatives defined in it that the module binds.

    ``name`` is an identifier-like label (file names, messages); ``text`` is the full C++ text
    (runtime include, user source, generated code); ``derivatives`` are Derivative-like objects
    (see docs/internals.md) whose functions are in ``text``.
    """

    name: str
    text: str
    derivatives: tuple[Any, ...]

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


def make_tu(derivatives: Any, name: str | None = None) -> TranslationUnit:
    """One translation unit for one or several derivatives of the same source.

    ``derivatives`` is a Derivative or a sequence of them. With several, the text is the first
    one's ``translation_unit()`` followed by the others' ``code`` (the user source appears once);
    they must all come from the same source text.
    """
    if isinstance(derivatives, TranslationUnit):
        return derivatives
    if not isinstance(derivatives, (list, tuple)):
        derivatives = (derivatives,)
    derivs = tuple(derivatives)
    if not derivs:
        raise GlueError("make_tu: expected at least one Derivative, got none")
    for d in derivs:
        if getattr(d, "method", False):
            raise GlueError(f"{d.name} is a member function: torchclad binds free functions "
                            "for Python (call it from a free function and differentiate that; "
                            "C++ code can call the generated functions, which take the object "
                            "first)")
    names = [d.name for d in derivs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise GlueError(
            f"make_tu: function(s) {', '.join(dup)} appear twice; one translation unit can hold "
            "one derivative per function (differentiate once, with the union of the wrt lists)"
        )
    first = derivs[0].translation_unit()
    if len(derivs) == 1:
        text = first
    elif all(hasattr(d, "functions") and hasattr(d, "source") for d in derivs):
        from torchclad.engine import combine  # the engine's: user source once, shared callees once

        if any(d.source != derivs[0].source for d in derivs):
            raise GlueError(
                f"make_tu: derivatives {', '.join(names)} come from different sources; "
                "build one translation unit per source file"
            )
        text = combine(list(derivs))
    else:
        prefixes = []
        for d in derivs:
            tu, code = d.translation_unit(), d.code
            if not tu.endswith(code):
                raise GlueError(
                    f"make_tu: {d.name}.translation_unit() does not end with its generated code; "
                    "cannot merge derivatives into one translation unit"
                )
            prefixes.append(tu[: len(tu) - len(code)])
        if any(p != prefixes[0] for p in prefixes[1:]):
            raise GlueError(
                f"make_tu: derivatives {', '.join(names)} come from different sources; "
                "build one translation unit per source file"
            )
        text = prefixes[0] + "".join(
            d.code if d.code.endswith("\n") else d.code + "\n" for d in derivs
        )
    return TranslationUnit(name=identifier(name or derivs[0].name), text=text, derivatives=derivs)


# ----------------------------------------------------------------------------------------------
# Types


def _is_void(p: Any) -> bool:
    return p is None or (p.base == "void" and not getattr(p, "pointer", 0))


def scalar_types(d: Any) -> tuple[str, ...]:
    """Scalar types to instantiate ``d`` for: both for a template, else the declared one."""
    if d.template_params:
        return ("float", "double")
    by_name = {p.name: p for p in d.params}
    candidates = [by_name[w] for w in d.wrt if w in by_name] + list(d.params)
    if not _is_void(d.return_type):
        candidates.append(d.return_type)
    for p in candidates:
        if p.base in SUFFIX:
            return (p.base,)
    raise GlueError(
        f"{d.name}: no float or double parameter or result; torchclad binds float32/float64 "
        "kernels (declare the floating parameters as float, double or a template parameter T)"
    )


def _base(p: Any, d: Any, scalar: str) -> str:
    return scalar if p.base in d.template_params else p.base


def _adjoint_type(p: Any, d: Any, scalar: str) -> str:
    """``S*`` for a scalar ``S p`` and for a pointer ``const S* p`` alike (non-const)."""
    return _base(p, d, scalar) + "*"


def bind_function_name(unit: str) -> str:
    return f"torchclad_bind_{identifier(unit)}"


# ----------------------------------------------------------------------------------------------
# Text


@dataclass(frozen=True)
class Slot:
    """One argument of a binding: ``name`` its keyword name on the Python side, ``role`` one of
    ``pointer`` / ``scalar`` (a parameter), ``seed`` (the return value's adjoint), ``adjoint``,
    ``tape``; ``ctype`` the C++ type the generated function takes; ``index`` the position among
    the parameters (or among the adjoints)."""

    name: str
    role: str
    ctype: str
    index: int = 0


@dataclass(frozen=True)
class Call:
    """One binding: the C++ function ``callee`` (template arguments included) of ``kind``
    (``""`` for the primal, else one of :data:`torchclad.engine.names.KINDS`), bound as
    ``binding``, returning ``result``, taking ``slots``."""

    kind: str
    binding: str
    callee: str
    result: str
    slots: tuple
    doc: str
    pair: bool = False    # the callee returns a clad::ValueAndPushforward (bound as a tuple)


def _param_slots(d: Any, scalar: str) -> list[Slot]:
    return [Slot(p.name, "pointer" if p.pointer else "scalar", p.c_type(scalar), i)
            for i, p in enumerate(d.params)]


#: spellings of the C++ arithmetic types pybind11 converts itself (anything else a scalar
#: parameter has is an enum, passed as its value)
_BUILTIN_SCALAR = re.compile(
    r"((un)?signed|short|int|long|char|bool|float|double|(std::)?u?int\d+_t|(std::)?size_t|"
    r"(std::)?ptrdiff_t)(\s+((un)?signed|short|int|long|char|double))*")


def _seeded(d: Any) -> bool:
    """Whether the generated functions take the seed of the result: a floating one (an
    integer result cuts the derivative)."""
    return not _is_void(d.return_type) and bool(d.return_type.differentiable)


def _seed_slots(d: Any, scalar: str) -> list[Slot]:
    if not _seeded(d):
        return []
    return [Slot(_names().RESULT_ADJOINT, "seed", d.return_type.c_type(scalar))]


def adjoint_names(d: Any) -> tuple[str, ...]:
    """Params with an adjoint in the generated functions, in order.

    The engine's ``Derivative.adjoints``: the ``wrt`` params, then the output arrays of a void
    kernel that are not in ``wrt`` (their adjoints carry the seed). Plain ``wrt`` otherwise.
    """
    adj = getattr(d, "adjoints", None)
    return tuple(adj) if adj is not None else tuple(d.wrt)


def _adjoint_slots(d: Any, scalar: str) -> list[Slot]:
    names = _names()
    by_name = {p.name: p for p in d.params}
    taken = {p.name for p in d.params}
    if not _is_void(d.return_type):
        taken.add(names.RESULT_ADJOINT)
    slots = []
    for j, w in enumerate(adjoint_names(d)):
        if w not in by_name:
            raise GlueError(f"{d.name}: adjoint of {w!r}, which is not a parameter")
        t = _adjoint_type(by_name[w], d, scalar)
        py = names.adjoint(w)
        k = 0
        while py in taken:  # e.g. a param named y: its adjoint is _d_y0, _d_y is the seed
            py, k = names.adjoint(f"{w}{k}"), k + 1
        taken.add(py)
        slots.append(Slot(py, "adjoint", t, j))
    return slots


def calls(d: Any, scalar: str) -> list[Call]:
    """Every binding of ``d`` for ``scalar``, in binding order: the primal, ``pullback``,
    ``grad`` (non-void only), ``reverse_forw``, ``reverse_sweep``."""
    if getattr(d, "method", False):
        raise GlueError(f"{d.name} is a member function: torchclad binds free functions "
                        "(call it from a free function and differentiate that; C++ code can "
                        "call the generated functions, which take the object first)")
    n, void = d.name, _is_void(d.return_type)
    targs = f"<{', '.join(scalar for _ in d.template_params)}>" if d.template_params else ""
    ret = "void" if void else d.return_type.c_type(scalar)
    P, Y, A = _param_slots(d, scalar), _seed_slots(d, scalar), _adjoint_slots(d, scalar)
    tape = [Slot(_names().TAPE, "tape", "torchclad::Tape&")]
    table = {  # kind -> (result, arguments, docstring), in binding order
        "": (ret, P, f"{n} ({scalar})"),
        "pullback": ("void", P + Y + A,
                     f"pullback of {n} ({scalar}); adjoints are addresses, accumulated with +="),
        "grad": ("void", P + A, f"gradient of {n} ({scalar}), seed 1; adjoints are addresses"),
        "reverse_forw": (ret, P + tape,
                         f"{n} ({scalar}), recording what the reverse sweep needs on the tape"),
        "reverse_sweep": ("void", P + Y + A + tape, f"reverse sweep of {n} ({scalar}); "
                          "consumes the tape of one reverse_forw call"),
        "reverse_sweep_assign": ("void", P + Y + A + tape,
                                 f"reverse sweep of {n} ({scalar}) that assigns the adjoints "
                                 "(any prior content is ignored) and leaves the seed as it is"),
    }
    if not _seeded(d):
        del table["grad"]  # only a floating result has a gradient
    from torchclad.engine.derivative import REVERSE_KINDS

    kinds = getattr(d, "kinds", None) or REVERSE_KINDS
    out = [Call(kind, binding_name(n, kind, scalar),
                (_names().generated(n, kind) if kind else n) + targs, result, tuple(args), doc)
           for kind, (result, args, doc) in table.items() if not kind or kind in kinds]
    return out + _forward_calls(d, scalar, targs, ret, P, Y, A)


def _tangents(of: list[Slot], first: int, taken: set) -> list[Slot]:
    """A tangent slot for each slot in ``of`` (same C++ type; an address for an array or an
    adjoint, a number for a scalar), named ``_d_<name>`` (numbered when ``taken``)."""
    out = []
    for j, s in enumerate(of):
        name = _names().tangent(s.name, taken)
        taken.add(name)
        role = "tangent_pointer" if s.role in ("pointer", "adjoint") else "tangent"
        out.append(Slot(name, role, s.ctype, first + j))
    return out


def _forward_calls(d: Any, scalar: str, targs: str, ret: str, P, Y, A) -> list[Call]:
    """The forward-mode bindings ``d`` has (``Derivative.kinds``): ``pushforward``,
    ``darg``, ``pullback_pushforward``."""
    kinds, n = getattr(d, "kinds", None) or (), d.name
    taken = {s.name for s in P + Y + A}
    out = []
    if "pushforward" in kinds:
        pair = ret != "void"
        out.append(Call("pushforward", binding_name(n, "pushforward", scalar),
                        _names().generated(n, "pushforward") + targs,
                        f"std::pair<{ret}, {ret}>" if pair else "void",
                        tuple(P + _tangents([P[i] for i, p in enumerate(d.params)
                                             if p.name in d.tangents], 0, set(taken))),
                        f"pushforward of {n} ({scalar}): tangents in, (value, tangent) out",
                        pair))
    if "darg" in kinds:
        out.append(Call("darg", binding_name(n, "darg", scalar),
                        _names().darg(n, d.darg) + targs, ret, tuple(P),
                        f"derivative of {n} ({scalar}) w.r.t. parameter {d.darg}"))
    if "pullback_pushforward" in kinds:
        out.append(Call("pullback_pushforward", binding_name(n, "pullback_pushforward", scalar),
                        _names().generated(n, "pullback_pushforward") + targs, "void",
                        tuple(P + Y + A + _tangents([(P + Y + A)[i] for i in d.second_mask],
                                                    100, set(taken))),
                        f"forward over reverse: the pushforward of {n}'s pullback ({scalar})"))
    return out


def _pybind_arg(s: Slot) -> tuple[str, str]:
    """(lambda parameter declaration, expression passed to the C++ function) of a slot."""
    if s.role == "pointer":
        return f"std::uintptr_t a{s.index}", f"reinterpret_cast<{s.ctype}>(a{s.index})"
    if s.role == "scalar" and not _BUILTIN_SCALAR.fullmatch(s.ctype.replace("const ", "").strip()):
        return f"long long a{s.index}", f"static_cast<{s.ctype}>(a{s.index})"  # an enum
    if s.role == "scalar":
        return f"{s.ctype} a{s.index}", f"a{s.index}"
    if s.role == "seed":
        return f"{s.ctype} dy", "dy"
    if s.role == "adjoint":
        return f"std::uintptr_t d{s.index}", f"reinterpret_cast<{s.ctype}>(d{s.index})"
    if s.role == "tangent_pointer":
        return f"std::uintptr_t t{s.index}", f"reinterpret_cast<{s.ctype}>(t{s.index})"
    if s.role == "tangent":
        return f"{s.ctype} t{s.index}", f"t{s.index}"
    return "torchclad::Tape& tape", "tape"


def _def(c: Call) -> str:
    args = [_pybind_arg(s) for s in c.slots]
    decls = ", ".join(a for a, _ in args)
    uses = ", ".join(u for _, u in args)
    call = f"{c.callee}({uses})"
    body = f"return {call};" if c.result != "void" else f"{call};"
    if c.pair:
        body = f"auto r = {call}; return {c.result}(r.value, r.pushforward);"
    py_names = [s.name for s in c.slots]
    kw = ""
    if len(set(py_names)) == len(py_names):
        kw = "".join(f', py::arg("{n}")' for n in py_names)
    return (
        f'    m.def("{c.binding}",\n'
        f"          []({decls}) -> {c.result} {{ {body} }},\n"
        f'          "{c.doc}"{kw},\n'
        f"          py::call_guard<py::gil_scoped_release>());\n"
    )


def _derivative_defs(d: Any) -> str:
    """The ``m.def`` of every binding of ``d``, for each of its scalar types."""
    out = []
    for scalar in scalar_types(d):
        out.append(f"    // {d.name} for {scalar}\n")
        out.extend(_def(c) for c in calls(d, scalar))
    return "".join(out)


_PRELUDE = (
    "#include <cstdint>\n"
    "#include <pybind11/pybind11.h>\n"
)


def bindings(unit: str, derivatives: Iterable[Any]) -> str:
    """``void torchclad_bind_<unit>(pybind11::module_& m)`` defining every binding of ``unit``."""
    derivs = list(derivatives)
    body = "".join(_derivative_defs(d) for d in derivs)
    names = ", ".join(f'"{d.name}"' for d in derivs)
    return (
        f"// pybind11 bindings of translation unit {unit!r} (generated by torchclad.toolchain.glue)\n"
        f"{_PRELUDE}\n"
        f"namespace py = pybind11;\n\n"
        f"void {bind_function_name(unit)}(py::module_& m) {{\n"
        f"{body}"
        f"    py::list kernels = m.attr(\"__torchclad_kernels__\");\n"
        f"    for (const char* k : {{{names}}}) kernels.append(k);\n"
        f"}}\n"
    )


def module_init(module: str, units: Sequence[str], *, declare: bool,
                signatures: str | None = None, attrs: dict[str, str] | None = None) -> str:
    """``PYBIND11_MODULE(module, m)``: binds ``Tape`` and calls each unit's bind function.

    ``declare``: emit declarations of the bind functions (when they live in other files).
    ``signatures``: JSON from :func:`torchclad.toolchain.signature.dumps`; the module then sets
    ``__torchclad_signatures__`` from it when imported.
    ``attrs``: module attributes set to string constants (identifier-like names; values without
    quotes or backslashes).
    """
    sig = ""
    if signatures is not None:
        delim = "tcsig"
        while f"){delim}\"" in signatures:
            delim += "_"
        sig = (
            f'    m.attr("__torchclad_signatures__") =\n'
            f'        py::module_::import("torchclad.toolchain.signature").attr("loads")(\n'
            f'            py::str(R"{delim}({signatures}){delim}"));\n'
        )
    for k, v in (attrs or {}).items():
        if not re.fullmatch(r"\w+", k) or '"' in v or "\\" in v or "\n" in v:
            raise GlueError(f"module attribute {k!r} = {v!r}: expected a plain name and value")
    extra = "".join(f'    m.attr("{k}") = "{v}";\n' for k, v in (attrs or {}).items())
    decls = "".join(f"void {bind_function_name(u)}(pybind11::module_& m);\n" for u in units)
    calls = "".join(f"    {bind_function_name(u)}(m);\n" for u in units)
    return (
        f"{decls if declare else ''}\n"
        f"PYBIND11_MODULE({module}, m) {{\n"
        f"    namespace py = pybind11;\n"
        f'    m.doc() = "torchclad generated derivatives";\n'
        f"    py::class_<torchclad::Tape>(m, \"Tape\", py::module_local())\n"
        f"        .def(py::init<>())\n"
        f'        .def("size_bytes", &torchclad::Tape::size_bytes)\n'
        f'        .def("empty", &torchclad::Tape::empty)\n'
        f'        .def("clear", &torchclad::Tape::clear);\n'
        f'    m.attr("__torchclad_kernels__") = py::list();\n'
        f"{calls}"
        f"{extra}"
        f"{sig}"
        f"}}\n"
    )


def jit_glue(tu: TranslationUnit, module: str) -> str:
    """Glue appended to ``tu.text`` to make one self-contained extension source."""
    return (
        "\n// ---- pybind11 glue (torchclad.toolchain.glue) ----\n"
        + bindings(tu.name, tu.derivatives)
        + module_init(module, [tu.name], declare=False)
    )
