"""Every name the engine generates, spelled once (Clad's conventions).

Passes, the toolchain's glue and the bridge ask this module; none of them builds or parses a
generated name with an f-string or a regex of its own.

Generated functions of a function ``f``::

    f_pullback(params..., [_d_y], _d_params...)    combined forward + reverse (Clad's)
    f_grad(params..., _d_params...)                seeds 1 on the return value (non-void f)
    f_reverse_forw(params..., _tape)               split mode: the recording forward
    f_reverse_sweep(params..., [_d_y], _d_params..., _tape)   split mode: the reverse sweep
    f_reverse_sweep_assign(same)                   the sweep that assigns its input adjoints,
                                                   only for an f whose custom derivative has an
                                                   assigning pullback f_pullback_assign (below)

Forward mode (Clad's ``clad::differentiate``)::

    f_darg0(params...)                             d(return)/d(param 0), a scalar parameter
    f_pushforward(params..., _d_params...)         tangents in, clad::ValueAndPushforward out
    f_pullback_pushforward(params..., [_d_y], _d_params..., tangents...)
                                                   forward over reverse: the pullback's tangent

A callee differentiated on part of its floating parameters gets the base ``f_d<i>_<j>...``
(:func:`masked`).

Locals of generated code: adjoints ``_d_x``, the return value's adjoint ``_d_y``, saved values
``_t0, _t1, ...``, adjoint temporaries ``_r_d0, _r_d1, ...``, the tape ``_tape``; the locals the
normalize pass, the reverse transform, checkpointing and loop ordering introduce are below.
Numbered locals are ``<prefix><n>``, counted per function from 0.
"""
from __future__ import annotations

# ----------------------------------------------------------------------- generated functions
PULLBACK = "_pullback"
GRAD = "_grad"
REVERSE_FORW = "_reverse_forw"
REVERSE_SWEEP = "_reverse_sweep"
REVERSE_SWEEP_ASSIGN = "_reverse_sweep_assign"
#: a custom derivative's assigning pullback, f_pullback_assign (torchclad's, not Clad's): the
#: signature of f_pullback; it writes every element of each input adjoint it is given (never
#: reads them) and only reads the seeds, so its caller needs neither zero-filled adjoints nor a
#: copy of the seeds
PULLBACK_ASSIGN = PULLBACK + "_assign"

PUSHFORWARD = "_pushforward"
DARG = "_darg"

#: every kind of generated function, in the order the bindings list them
#: ("darg" names the binding of f_darg<k>, whose index the Derivative records)
KINDS = ("pullback", "grad", "reverse_forw", "reverse_sweep", "reverse_sweep_assign",
         "pushforward", "pullback_pushforward", "darg")
_SUFFIX_OF_KIND = {"pullback": PULLBACK, "grad": GRAD, "reverse_forw": REVERSE_FORW,
                   "reverse_sweep": REVERSE_SWEEP, "reverse_sweep_assign": REVERSE_SWEEP_ASSIGN,
                   "pushforward": PUSHFORWARD,
                   "pullback_pushforward": PULLBACK + PUSHFORWARD, "darg": DARG}


def generated(base: str, kind: str) -> str:
    """The name of the generated function of ``kind`` (one of :data:`KINDS`) for ``base``."""
    return base + _SUFFIX_OF_KIND[kind]


def pullback(base: str) -> str:
    return base + PULLBACK


def grad(base: str) -> str:
    return base + GRAD


def reverse_forw(base: str) -> str:
    return base + REVERSE_FORW


def reverse_sweep(base: str) -> str:
    return base + REVERSE_SWEEP


def reverse_sweep_assign(base: str) -> str:
    return base + REVERSE_SWEEP_ASSIGN


def pullback_assign(base: str) -> str:
    return base + PULLBACK_ASSIGN


def pushforward(base: str) -> str:
    """``f_pushforward``: tangents in, value and tangent out (also of generated functions:
    ``f_pullback_pushforward``, ``f_reverse_sweep_pushforward``)."""
    return base + PUSHFORWARD


def darg(base: str, index: int) -> str:
    """``f_darg0``: the derivative of ``base``'s result w.r.t. its parameter ``index``."""
    return f"{base}{DARG}{index}"


#: between a function's name and the indices of its differentiated parameters: f_d0_2
MASK_INFIX = "_d"


def masked(name: str, mask) -> str:
    """``f_d0_2``: the base of ``name`` differentiated on the parameters at indices ``mask``."""
    return name + MASK_INFIX + "_".join(map(str, mask))


def split_generated(name: str) -> tuple[str, str] | None:
    """``(base, kind)`` for a generated function's name, None for any other name."""
    for kind in sorted(KINDS, key=lambda k: -len(_SUFFIX_OF_KIND[k])):
        suffix = _SUFFIX_OF_KIND[kind]
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)], kind
    return None


# ------------------------------------------------------------------- locals of generated code
ADJOINT_PREFIX = "_d_"
#: the adjoint of a non-void function's return value (the seed)
RESULT_ADJOINT = "_d_y"
#: the tape parameter / local of split and combined code
TAPE = "_tape"
#: saved (recorded) values: _t0, _t1, ...
SAVED_PREFIX = "_t"
#: adjoint temporaries: _r_d0, _r_d1, ...
ADJOINT_TEMP_PREFIX = "_r_d"


def adjoint(name: str) -> str:
    """``_d_x`` for ``x``."""
    return ADJOINT_PREFIX + name


#: the counter of the loop that zeroes a global array's adjoint: _k0
RESET_INDEX = "_k"


def global_adjoint(name: str) -> str:
    """The adjoint of a non-const global `g`: the global `_d_g` of the generated code (the
    same in every generated function; never the return seed's name)."""
    return adjoint(name) if adjoint(name) != RESULT_ADJOINT else adjoint(name + "_global")


def is_adjoint(name: str) -> bool:
    return name.startswith(ADJOINT_PREFIX)


def numbered_result_adjoint(taken) -> str:
    """``_d_y0`` (or the next free number): the adjoint of a variable named ``y`` in a function
    whose return seed is ``_d_y`` (Clad's rule); ``taken``: adjoint names already in use."""
    k = 0
    while f"{RESULT_ADJOINT}{k}" in taken:
        k += 1
    return f"{RESULT_ADJOINT}{k}"


# ------------------------------------------------------------------ locals of forward mode
#: a tangent is spelled like an adjoint (Clad's convention): _d_x; where that name is taken
#: (the pullback a forward-over-reverse pass differentiates has its adjoints), _d_x0, _d_x1...
TANGENT_PREFIX = ADJOINT_PREFIX
#: what a pushforward returns for a non-void function, and its two fields (Clad's
#: clad::ValueAndPushforward, defined in torchclad/forward.h of the runtime)
VALUE_AND_PUSHFORWARD = "clad::ValueAndPushforward"
VALUE_FIELD, PUSHFORWARD_FIELD = "value", "pushforward"
#: runtime helpers that keep a forward-over-reverse tape balanced where an array has no tangent
PUSH_ZERO_ARRAY = "::torchclad::push_zero_array"
DROP_ARRAY = "::torchclad::drop_array"


#: the tangent of a non-const global `g` in forward mode: the global `_dt_g` of the generated
#: code (the reverse's adjoint of g, `_d_g`, may be in the same translation unit)
GLOBAL_TANGENT_PREFIX = "_dt_"


def global_tangent(name: str) -> str:
    return GLOBAL_TANGENT_PREFIX + name


def tangent(name: str, taken) -> str:
    """``_d_x`` for ``x``, or ``_d_x0`` (the next free number) when ``taken`` holds it."""
    cand = TANGENT_PREFIX + name
    k = 0
    while cand in taken:
        cand = f"{TANGENT_PREFIX}{name}{k}"
        k += 1
    return cand


#: scalar adjoint temporaries of a call's by-value floating arguments: _r0, _r1, ...
CALL_ADJOINT_PREFIX = "_r"
#: offsets of pointers into local arrays, kept instead of the pointer: _off0, ...
OFFSET_PREFIX = "_off"

# ------------------------------------------------------------ member functions
#: the object a member function is called on, its first parameter in the IR and in the
#: generated (free) functions: _this
THIS = "_this"


def method(cls: str, name: str) -> str:
    """The name a member function `cls::name` goes by in the engine and the base of its
    generated functions: `cls_name`."""
    return f"{cls.replace('::', '_')}_{name}"


# ------------------------------------------------------------ locals of the lowering
#: a temporary a reference parameter binds (`g(x * 2)` for `g(const double&)`): _ref0, ...
REF_TEMP = "_ref"


def ref_temp(n: int) -> str:
    return f"{REF_TEMP}{n}"


#: whether the elements a write overwrites are never read before it (tested on entry;
#: the write records only when it is false): _disjoint0, ...
DISJOINT_FLAG = "_disjoint"

#: a loop's conditional overwrite of a scalar (engine/lastwrite.py): the loop's own copy of
#: it, whether it was overwritten, and at which counter: _v0, _took0, _at0
LAST_VALUE, LAST_TAKEN, LAST_INDEX = "_v", "_took", "_at"

#: the local array that holds what a `new` allocates: _new0, ...
NEW_BUFFER = "_new"

#: the index of a range-based for over an array: _i0, ...
RANGE_INDEX = "_i"

#: the value of a ?:, && or || whose operands have side effects: _cond0, ...
COND_TEMP = "_cond"


def numbered(prefix: str, n: int) -> str:
    """``<prefix><n>``: the n-th local of a kind."""
    return f"{prefix}{n}"


# ---------------------------------------------------------- locals of the normalize pass
#: the local copy of a pointer parameter the body moves (`arr = arr + 1`): _p_arr
MOVED_PARAM_PREFIX = "_p_"


def moved_param(name: str) -> str:
    return MOVED_PARAM_PREFIX + name


#: a call's result hoisted out of an expression: _call0, ...
CALL_RESULT = "_call"
#: flags of lowered break / continue / first iteration: _brk0, _cnt0, _first0
BREAK_FLAG, CONTINUE_FLAG, FIRST_FLAG = "_brk", "_cnt", "_first"
#: a lowered switch's value and its fall-through flag: _sw0, _fall0
SWITCH_VALUE, FALL_FLAG = "_sw", "_fall"
#: an early-return function's flag (returned yet) and value
RETURN_FLAG, RETURN_VALUE = "_ret", "_retval"

# -------------------------------------------------------- locals of checkpointed loops
#: trip count, segment length, segment start and end of a checkpointed loop
CHECKPOINT_TRIPS, CHECKPOINT_EVERY = "_cp_n", "_cp_k"
CHECKPOINT_START, CHECKPOINT_END = "_cp_s", "_cp_e"

# ------------------------------------------------------ locals of fixed-lane reductions
#: block start, lane index and lane array of the k-th fixed-lane reduction: _ib0, _j0, _lane0
LANE_BLOCK, LANE_INDEX, LANE_ARRAY = "_ib", "_j", "_lane"

# ------------------------------------------------- partial sums of a parallel reverse loop
#: a fixed number of chunks of iterations, where chunk c starts, and the combination of the
#: chunks' partial sums into the adjoint in chunk order (torchclad/parallel.h of the runtime)
PAR_CHUNKS, PAR_BEGIN, PAR_COMBINE = ("torchclad::par_chunks", "torchclad::par_begin",
                                      "torchclad::par_combine")
#: the storage of a std::vector local (partial sums, per-iteration slots): Raw text, {0} the vector
VECTOR_DATA = "{0}.data()"
