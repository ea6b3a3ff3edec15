"""Derivative rules of the math functions, one declarative table.

`pullbacks[k]` is the adjoint of argument k as C++ text with {d} (the incoming adjoint),
{x0}, {x1}, ... (the arguments, recomputed in the reverse sweep) and {y} (the call's result).
Helpers live in csrc/runtime/torchclad/math.h (namespace torchclad::rt). Kinks follow
PyTorch: max/min ties split the gradient evenly, abs'(0) = 0.

Forward mode reads the same table: every function here maps scalars to a scalar, so the
partial derivative dy/dx_k is one number both ways, and argument k's pushforward is its
pullback with the argument's tangent in place of {d} (each template is linear in {d}); the
tangent of a call is the sum over its arguments. The helpers the pullbacks call have rules of
their own (the second derivatives), so that a generated pullback can be differentiated again
(forward over reverse: Hessians, double backward).
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import ir
from ..errors import DiffError
from . import template

RT = "::torchclad::rt::"


@dataclass(frozen=True)
class Rule:
    names: tuple
    pullbacks: tuple            # one per argument; None = that argument gets no derivative
    uses_result: bool = False
    zero: bool = False          # piecewise constant: derivative 0 everywhere (floor, ceil)
    # the value is the argument, the derivative dropped (a stop-gradient): a generated pullback
    # is a function of it like of anything else, so forward over reverse reads it as identity
    identity: bool = False


def _aliases(base: str) -> tuple:
    return (base, base + "f", "std::" + base, "std::" + base + "f", base + "l", "::" + base)


def _rt(name: str) -> tuple:
    return ("torchclad::rt::" + name, RT + name)


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
    Rule(("torchclad::detach", "::torchclad::detach"), (None,), zero=True, identity=True),
    Rule(_aliases("fmod"), ("{d}", f"-{{d}} * {RT}trunc_div({{x0}}, {{x1}})")),
    # fma(a, b, c) = a * b + c
    Rule(_aliases("fma"), ("{d} * {x1}", "{x0} * {d}", "{d}")),
    # clamp(v, lo, hi): v where lo <= v <= hi (PyTorch's clamp), lo below, hi above
    Rule(("std::clamp", "clamp"), (f"{{d}} * {RT}d_clamp_v({{x0}}, {{x1}}, {{x2}})",
                                   f"{{d}} * {RT}d_clamp_lo({{x0}}, {{x1}})",
                                   f"{{d}} * {RT}d_clamp_hi({{x0}}, {{x2}})")),
    # ---- the runtime helpers of the pullbacks above: their own derivatives (second order)
    Rule(_rt("ln2"), (None,), zero=True),
    Rule(_rt("ln10"), (None,), zero=True),
    Rule(_rt("d_sqrt"), ("-{d} * {y} / {x0}",), uses_result=True),            # 1/(2y)
    Rule(_rt("d_cbrt"), ("-2 * {d} * {y} / {x0}",), uses_result=True),        # 1/(3y^2)
    Rule(_rt("d_tanh"), ("-2 * {d} * {x0}",)),                                # 1 - y^2
    Rule(_rt("d_tan"), ("2 * {d} * {x0}",)),                                  # 1 + y^2
    Rule(_rt("d_asin"), ("{d} * {x0} * {y} * {y} * {y}",), uses_result=True),  # (1-x^2)^-1/2
    Rule(_rt("d_atan"), ("-2 * {d} * {x0} * {y} * {y}",), uses_result=True),  # 1/(1+x^2)
    Rule(_rt("d_atan2_y"), (f"-{{d}} * {RT}d2_atan2_a({{x0}}, {{x1}})",        # x/(x^2+y^2)
                            f"{{d}} * {RT}d2_atan2_b({{x0}}, {{x1}})")),
    Rule(_rt("d_atan2_x"), (f"{{d}} * {RT}d2_atan2_b({{x0}}, {{x1}})",         # -y/(x^2+y^2)
                            f"{{d}} * {RT}d2_atan2_a({{x0}}, {{x1}})")),
    Rule(_rt("d_erf"), ("-2 * {d} * {x0} * {y}",), uses_result=True),         # c exp(-x^2)
    Rule(_rt("sign"), (None,), zero=True),
    Rule(_rt("d_max_a"), (None, None), zero=True),
    Rule(_rt("d_min_a"), (None, None), zero=True),
    Rule(_rt("trunc_div"), (None, None), zero=True),
    Rule(_rt("d_clamp_v"), (None, None, None), zero=True),
    Rule(_rt("d_clamp_lo"), (None, None), zero=True),
    Rule(_rt("d_clamp_hi"), (None, None), zero=True),
    Rule(_rt("d_pow_base"), (f"{{d}} * {RT}d2_pow_base_x({{x0}}, {{x1}})",    # p x^(p-1)
                             f"{{d}} * {RT}d2_pow_base_p({{x0}}, {{x1}})")),
    Rule(_rt("d_pow_exp"), (f"{{d}} * {RT}d2_pow_exp_x({{x0}}, {{x1}}, {{x2}})",  # y log x
                            None,
                            f"{{d}} * {RT}d2_pow_exp_y({{x0}}, {{x1}}, {{x2}})")),
    # the second derivatives' helpers are only ever differentiated a third time, which the
    # bridge refuses; they have no rules.
)

_BY_NAME = {}
for _r in RULES:
    for _n in _r.names:
        _BY_NAME.setdefault(_n, _r)


def lookup(name: str) -> "Rule | None":
    return _BY_NAME.get(name)


def rule_for(call: ir.Call, loc, custom_name: str) -> Rule:
    """The rule of a math call, or the DiffError naming what to do: define the function, or
    give it the custom derivative `custom_name` (f_pullback / f_pushforward, by mode)."""
    name = ir.call_name(call.fn)
    if call.user:
        raise DiffError(loc, f"internal: user call '{name}' was not hoisted")
    rule = lookup(name)
    if rule is None:
        raise DiffError(loc, f"no derivative for call to '{name}': define '{name}' in this "
                             "source, or give it a custom derivative "
                             f"clad::custom_derivatives::{custom_name}")
    if len(rule.pullbacks) != len(call.args):
        raise DiffError(loc, f"'{name}' called with {len(call.args)} arguments; its "
                             f"derivative rule takes {len(rule.pullbacks)}")
    return rule


def _values(args: tuple, result, d) -> dict:
    out = {f"x{k}": a for k, a in enumerate(args)}
    for k in (1, 2):                  # a shorter call reads its last argument there
        out.setdefault(f"x{k}", args[-1])
    out.update(d=d, y=result)
    return out


def pullback(rule: Rule, k: int, args: tuple, result, d, typ: ir.Type) -> ir.Raw:
    """Argument k's adjoint contribution d * dy/dx_k, as the `Raw` generated code spells."""
    text = rule.pullbacks[k]
    values = _values(args, result, d)
    return ir.Raw(template.numbered(text), typ,
                  tuple(values[p] for p in template.placeholders(text)))


def pushforward(rule: Rule, k: int, args: tuple, result, tangent, typ: ir.Type) -> ir.Expr:
    """Argument k's tangent contribution dy/dx_k * tangent, as structured IR."""
    return template.build(rule.pullbacks[k], _values(args, result, tangent), typ)


#: the text a rule application's `Raw` has -> its template
_BY_NUMBERED = {template.numbered(pb): pb for r in RULES for pb in r.pullbacks if pb is not None}


def expand(raw: ir.Raw) -> "ir.Expr | None":
    """The structured IR of a rule application's `Raw` (made by `pullback`), None for any
    other `Raw` (a loop condition, ...)."""
    text = _BY_NUMBERED.get(raw.text)
    if text is None:
        return None
    return template.build(text, dict(zip(template.placeholders(text), raw.reads)), raw.type)
