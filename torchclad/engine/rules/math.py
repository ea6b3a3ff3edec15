"""Derivative rules of the math functions, one declarative table.

`pullbacks[k]` is the adjoint of argument k as C++ text with {d} (the incoming adjoint),
{x0}, {x1}, {x2} (the arguments, recomputed in the reverse sweep) and {y} (the call's
result).
Helpers live in csrc/runtime/torchclad/math.h (namespace torchclad::rt). Kinks follow
PyTorch: max/min ties split the gradient evenly, abs'(0) = 0.
"""
from __future__ import annotations

from dataclasses import dataclass

RT = "::torchclad::rt::"


@dataclass(frozen=True)
class Rule:
    names: tuple
    pullbacks: tuple            # one per argument; None = that argument gets no derivative
    uses_result: bool = False
    zero: bool = False          # piecewise constant: derivative 0 everywhere (floor, ceil)


def _aliases(base: str) -> tuple:
    return (base, base + "f", "std::" + base, "std::" + base + "f", base + "l", "::" + base)


RULES = (
    Rule(_aliases("exp"), ("{d} * {y}",), uses_result=True),
    Rule(_aliases("expm1"), ("{d} * ({y} + 1)",), uses_result=True),
    Rule(_aliases("exp2"), (f"{{d}} * {RT}ln2({{y}}) * {{y}}",), uses_result=True),
    Rule(_aliases("log"), ("{d} / {x0}",)),
    Rule(_aliases("log2"), (f"{{d}} / ({{x0}} * {RT}ln2({{x0}}))",)),
    Rule(_aliases("log10"), (f"{{d}} / ({{x0}} * {RT}ln10({{x0}}))",)),
    Rule(_aliases("log1p"), ("{d} / (1 + {x0})",)),
    Rule(_aliases("sqrt"), (f"{{d}} * {RT}d_sqrt({{y}})",), uses_result=True),
    Rule(_aliases("cbrt"), (f"{{d}} * {RT}d_cbrt({{y}})",), uses_result=True),
    Rule(_aliases("pow"), (f"{{d}} * {RT}d_pow_base({{x0}}, {{x1}})",
                           f"{{d}} * {RT}d_pow_exp({{x0}}, {{x1}}, {{y}})"), uses_result=True),
    Rule(_aliases("sin"), ("{d} * std::cos({x0})",)),
    Rule(_aliases("cos"), ("-{d} * std::sin({x0})",)),
    Rule(_aliases("tan"), (f"{{d}} * {RT}d_tan({{y}})",), uses_result=True),
    Rule(_aliases("tanh"), (f"{{d}} * {RT}d_tanh({{y}})",), uses_result=True),
    Rule(_aliases("sinh"), ("{d} * std::cosh({x0})",)),
    Rule(_aliases("cosh"), ("{d} * std::sinh({x0})",)),
    Rule(_aliases("asin"), (f"{{d}} * {RT}d_asin({{x0}})",)),
    Rule(_aliases("acos"), (f"-{{d}} * {RT}d_asin({{x0}})",)),
    Rule(_aliases("atan"), (f"{{d}} * {RT}d_atan({{x0}})",)),
    Rule(_aliases("atan2"), (f"{{d}} * {RT}d_atan2_y({{x0}}, {{x1}})",
                             f"{{d}} * {RT}d_atan2_x({{x0}}, {{x1}})")),
    Rule(_aliases("erf"), (f"{{d}} * {RT}d_erf({{x0}})",)),
    Rule(_aliases("erfc"), (f"-{{d}} * {RT}d_erf({{x0}})",)),
    Rule(_aliases("fabs") + ("std::abs", "abs"), (f"{{d}} * {RT}sign({{x0}})",)),
    Rule(_aliases("fmax") + ("std::max", "max"),
         (f"{{d}} * {RT}d_max_a({{x0}}, {{x1}})", f"{{d}} * {RT}d_max_a({{x1}}, {{x0}})")),
    Rule(_aliases("fmin") + ("std::min", "min"),
         (f"{{d}} * {RT}d_min_a({{x0}}, {{x1}})", f"{{d}} * {RT}d_min_a({{x1}}, {{x0}})")),
    Rule(_aliases("hypot"), ("{d} * {x0} / {y}", "{d} * {x1} / {y}"), uses_result=True),
    Rule(_aliases("floor"), (None,), zero=True),
    Rule(_aliases("ceil"), (None,), zero=True),
    Rule(_aliases("round"), (None,), zero=True),
    Rule(_aliases("trunc"), (None,), zero=True),
    # identity in the forward, no derivative: a stop-gradient (e.g. the max shift of a
    # softmax, which the result does not depend on); defined in torchclad/runtime.h
    Rule(("torchclad::detach", "::torchclad::detach"), (None,), zero=True),
    Rule(_aliases("fmod"), ("{d}", f"-{{d}} * {RT}trunc_div({{x0}}, {{x1}})")),
    # fma(a, b, c) = a * b + c
    Rule(_aliases("fma"), ("{d} * {x1}", "{x0} * {d}", "{d}")),
    # clamp(v, lo, hi): v where lo <= v <= hi (PyTorch's clamp), lo below, hi above
    Rule(("std::clamp", "clamp"), (f"{{d}} * {RT}d_clamp_v({{x0}}, {{x1}}, {{x2}})",
                                   f"{{d}} * {RT}d_clamp_lo({{x0}}, {{x1}})",
                                   f"{{d}} * {RT}d_clamp_hi({{x0}}, {{x2}})")),
)

_BY_NAME = {}
for _r in RULES:
    for _n in _r.names:
        _BY_NAME.setdefault(_n, _r)


def lookup(name: str) -> "Rule | None":
    return _BY_NAME.get(name)
