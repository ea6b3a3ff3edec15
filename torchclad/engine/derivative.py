"""What the engine hands to the toolchain and the bridge: a `Derivative` and its `ParamInfo`s.

This module imports nothing else of the engine (no libclang): `torchclad.toolchain.signature`
rebuilds the built-in kernels' `ParamInfo`s from JSON when the compiled extension is imported.
"""
from __future__ import annotations

from dataclasses import dataclass, field

#: the file name compiler messages give the generated part of a translation unit (a #line)
GENERATED_FILE = "torchclad-generated.cpp"

#: the entry points of reverse mode (`grad` only for a non-void function)
REVERSE_KINDS = ("pullback", "grad", "reverse_forw", "reverse_sweep")


@dataclass(frozen=True)
class ParamInfo:
    """One parameter (or, with an empty name, the return type) of a differentiated function."""
    name: str
    base: str
    pointer: int
    const: bool
    differentiable: bool
    template: tuple = ()
    reference: bool = False      # a scalar passed by reference (`double& x`); pointer is 0

    def c_type(self, scalar: str | None = None) -> str:
        """The C++ type of a value of it (a reference's: the referred type)."""
        base = scalar if (scalar is not None and self.base in self.template) else self.base
        return ("const " if self.const else "") + base + "*" * self.pointer


@dataclass(frozen=True)
class Derivative:
    name: str
    params: tuple
    return_type: ParamInfo
    wrt: tuple                   # requested params, in wrt order
    adjoints: tuple              # adjoint params of the generated functions, in order
    template_params: tuple
    functions: tuple             # ((name, text), ...) callees first
    source: str = field(repr=False, default="")
    filename: str = "kernel.cpp"
    report: str = field(repr=False, default="")
    # Whether a reverse sweep (this function's or a callee's) may write primal memory the
    # caller passed in, i.e. restore values the forward overwrote. False means the sweep
    # leaves every primal array as the forward left it (custom pullbacks are trusted to write
    # adjoints only, Clad's convention). The bridge uses it to decide whether outputs need a
    # copy around the sweep.
    sweep_writes_primal: bool = True
    # a member function (`Cls::m`, generated as free functions of the object pointer _this):
    # C++ callers use it; the Python bindings do not take an object
    method: bool = False
    # What the engine could not keep parallel, each "file:line:col: reason" (also raised as
    # torchclad.engine.ParallelWarning when generated): an OpenMP pragma it dropped, a reverse
    # loop that runs serially. Empty when every pragma's loop is parallel in both sweeps.
    notes: tuple = ()
    # Which entry points were generated (see torchclad.engine.names.KINDS, and "darg"): the
    # reverse mode's by default; forward mode adds "pushforward" (and "darg"), forward over
    # reverse "pullback_pushforward".
    kinds: tuple = REVERSE_KINDS
    # f_pushforward's tangent parameters: the names of the parameters that have one, in
    # parameter order (the wrt parameters and the output arrays).
    tangents: tuple = ()
    # The floating arrays the function writes (its outputs), in parameter order.
    outputs: tuple = ()
    # The parameter index f_darg<k> differentiates, when it was generated.
    darg: "int | None" = None
    # f_pullback_pushforward's tangent parameters: indices into f_pullback's parameters
    # (params..., [_d_y], adjoints...), in order.
    second_mask: tuple = ()
    # The assigning sweep (kind "reverse_sweep_assign") of a generated kernel: it never writes
    # a seed (the caller passes the grads uncopied), and per input adjoint
    # ((input adjoint, size), ...): it writes every element of that adjoint when the buffer has
    # as many elements as the size says -- a size parameter (an elementwise kernel,
    # engine/reverse/assign.py) or a product of them, "N*C" (rows each iteration owns and
    # zeroes, engine/reverse/rows.py); the caller zeroes a buffer of another size, and must
    # not pass a smaller one -- or, with "" for the size, adds into it like the sweep (the
    # caller zeroes it; engine/analysis/outputs.py). Empty for a custom f_pullback_assign,
    # which writes every element.
    assign_extents: tuple = ()
    # The int parameters that must be >= 0 when the assigning sweep runs (its proof assumes
    # so); with a negative one the caller runs the accumulating sweep.
    assign_nonneg: tuple = ()
    # Of the input adjoints with a size parameter, those the assigning sweep writes as a copy
    # of one seed, element for element: ((input adjoint, seed), ...). Where the input, the
    # output and the size parameter's value have one number of elements, that input's
    # gradient is the seed's grad itself (the caller need not run the sweep for it).
    assign_copies: tuple = ()

    @property
    def code(self) -> str:
        return "\n".join(text for _, text in self.functions)

    def translation_unit(self) -> str:
        return combine([self])


def combine(derivs) -> str:
    """One translation unit for derivatives of one source (shared callees once)."""
    if not derivs:
        return ""
    src = derivs[0].source
    seen, parts = set(), []
    for d in derivs:
        if d.source != src:
            raise ValueError("combine() takes derivatives of one source")
        for name, text in d.functions:
            if name not in seen:
                seen.add(name)
                parts.append(text)
    # compiler messages name the user's file for the source and GENERATED_FILE for the
    # derivative, whose line numbers are those of Derivative.code
    return ("#include <torchclad/runtime.h>\n" + f"#line 1 \"{derivs[0].filename}\"\n" + src +
            f"\n// ---- generated by torchclad ----\n#line 1 \"{GENERATED_FILE}\"\n" +
            "\n".join(parts))
