"""Every rule of the math table (torchclad/engine/rules/math.py) against finite differences.

The test iterates ``RULES`` itself: each alias spelling of each rule becomes one statement
``out[k] = alias(x[i], ...)`` of ONE generated kernel, compiled once. Every ``out[k]`` reads its
own ``x`` entries, so seeding ``out`` with ones gives ``dx[i] = d out[k] / d x[i]`` for every
statement in one call. The expected value is a central difference of the Python reference of the
rule, in float64, at points inside the domain and away from kinks (``POINTS`` below). A rule
without points fails ``test_every_rule_has_points``, so a new rule cannot go untested.
"""

from __future__ import annotations

import math

import pytest
import torch

import torchclad
from torchclad.engine.rules import math as rules


def _detach(x):
    """Stop-gradient: the rule's derivative is 0 (the forward is the identity)."""
    return 0.0


# names[0] of a rule -> (Python reference, points). Each point is one tuple of arguments.
POINTS = {
    "exp": (math.exp, [(0.3,), (-1.2,)]),
    "expm1": (math.expm1, [(0.2,), (-0.7,)]),
    "exp2": (lambda x: 2.0 ** x, [(0.6,), (-1.4,)]),
    "log": (math.log, [(0.4,), (3.1,)]),
    "log2": (math.log2, [(0.7,), (5.5,)]),
    "log10": (math.log10, [(0.9,), (12.0,)]),
    "log1p": (math.log1p, [(0.3,), (-0.5,)]),
    "sqrt": (math.sqrt, [(0.8,), (2.5,)]),
    "cbrt": (lambda x: math.copysign(abs(x) ** (1 / 3), x), [(2.5,), (-1.7,)]),
    "pow": (math.pow, [(1.7, 2.3), (0.6, -1.4)]),
    "sin": (math.sin, [(0.4,), (-2.2,)]),
    "cos": (math.cos, [(0.4,), (-2.2,)]),
    "tan": (math.tan, [(0.4,), (-1.1,)]),
    "tanh": (math.tanh, [(0.4,), (-1.3,)]),
    "sinh": (math.sinh, [(0.4,), (-1.3,)]),
    "cosh": (math.cosh, [(0.4,), (-1.3,)]),
    "asin": (math.asin, [(0.3,), (-0.6,)]),
    "acos": (math.acos, [(0.3,), (-0.6,)]),
    "atan": (math.atan, [(0.3,), (-2.6,)]),
    "atan2": (math.atan2, [(0.5, 1.2), (-0.7, -0.4)]),
    "erf": (math.erf, [(0.3,), (-1.1,)]),
    "erfc": (math.erfc, [(0.3,), (-1.1,)]),
    "fabs": (math.fabs, [(-1.3,), (0.8,)]),
    "fmax": (max, [(1.0, 2.0), (2.5, -1.0)]),
    "fmin": (min, [(1.0, 2.0), (2.5, -1.0)]),
    "hypot": (math.hypot, [(3.0, -4.0), (-0.5, 1.2)]),
    "floor": (math.floor, [(1.3,), (-2.6,)]),
    "ceil": (math.ceil, [(1.3,), (-2.6,)]),
    "round": (round, [(1.3,), (-2.7,)]),
    "trunc": (math.trunc, [(1.3,), (-2.6,)]),
    "torchclad::detach": (_detach, [(0.7,)]),
    "fmod": (math.fmod, [(5.3, 2.1), (-7.4, 1.9)]),
    "fma": (lambda a, b, c: a * b + c, [(1.3, -0.7, 0.4), (-2.1, 0.5, 1.5)]),
    "std::clamp": (lambda v, lo, hi: min(max(v, lo), hi),
                   [(0.3, -1.0, 1.0), (2.0, -1.0, 1.0), (-3.0, -1.0, 1.0)]),
    # the runtime helpers of the pullbacks (their rules are the second derivatives)
    "torchclad::rt::ln2": (lambda y: math.log(2.0), [(0.7,)]),
    "torchclad::rt::ln10": (lambda y: math.log(10.0), [(0.7,)]),
    "torchclad::rt::d_sqrt": (lambda y: 0.5 / y, [(0.8,), (2.5,)]),
    "torchclad::rt::d_cbrt": (lambda y: 1 / (3 * y * y), [(1.3,), (-0.7,)]),
    "torchclad::rt::d_tanh": (lambda y: 1 - y * y, [(0.4,), (-0.8,)]),
    "torchclad::rt::d_tan": (lambda y: 1 + y * y, [(0.4,), (-0.8,)]),
    "torchclad::rt::d_asin": (lambda x: 1 / math.sqrt(1 - x * x), [(0.3,), (-0.6,)]),
    "torchclad::rt::d_atan": (lambda x: 1 / (1 + x * x), [(0.3,), (-2.6,)]),
    "torchclad::rt::d_atan2_y": (lambda y, x: x / (x * x + y * y), [(0.5, 1.2), (-0.7, -0.4)]),
    "torchclad::rt::d_atan2_x": (lambda y, x: -y / (x * x + y * y), [(0.5, 1.2), (-0.7, -0.4)]),
    "torchclad::rt::d_erf": (lambda x: 2 / math.sqrt(math.pi) * math.exp(-x * x), [(0.3,), (-1.1,)]),
    "torchclad::rt::sign": (lambda x: math.copysign(1.0, x), [(0.7,), (-1.2,)]),
    "torchclad::rt::d_max_a": (lambda a, b: 1.0 if a > b else 0.0, [(1.0, 2.0), (2.5, -1.0)]),
    "torchclad::rt::d_min_a": (lambda a, b: 1.0 if a < b else 0.0, [(1.0, 2.0), (2.5, -1.0)]),
    "torchclad::rt::trunc_div": (lambda x, y: math.trunc(x / y), [(5.3, 2.1), (-7.4, 1.9)]),
    "torchclad::rt::d_clamp_v": (lambda v, lo, hi: 1.0 if lo <= v <= hi else 0.0,
                                 [(0.3, -1.0, 1.0), (2.0, -1.0, 1.0)]),
    "torchclad::rt::d_clamp_lo": (lambda v, lo: 1.0 if v < lo else 0.0, [(0.3, -1.0), (-2.0, -1.0)]),
    "torchclad::rt::d_clamp_hi": (lambda v, hi: 1.0 if v > hi else 0.0, [(0.3, 1.0), (2.0, 1.0)]),
    "torchclad::rt::d_pow_base": (lambda x, p: p * x ** (p - 1), [(1.7, 2.3), (0.6, -1.4)]),
    "torchclad::rt::d_pow_exp": (lambda x, p, y: y * math.log(x), [(1.7, 2.3, 0.8), (0.6, -1.4, 2.1)]),
}

# libstdc++ before GCC 14 (bug 79700) lacks std::expf, std::sinf, ...; the kernel declares the
# float spellings of the table in std itself (a repeated using-declaration is legal where the
# library already has one), and brings std::max/min into scope for the unqualified aliases.
PRELUDE = """#include <cmath>
#include <math.h>
#include <stdlib.h>
#include <algorithm>
#include <torchclad/runtime.h>
"""

H = 1e-5


def _key(rule) -> str:
    return rule.names[0]


def _is_float_spelling(rule, alias: str) -> bool:
    return alias.split("::")[-1] == _key(rule) + "f"


def _build():
    """The kernel's source and one slot per statement: (rule key, alias, point, x indices)."""
    usings, body, slots, n = [], [], [], 0
    for rule in rules.RULES:
        _, points = POINTS.get(_key(rule), (None, []))
        for alias in rule.names:
            if alias.startswith("std::") and _is_float_spelling(rule, alias):
                usings.append(f"namespace std {{ using ::{alias[5:]}; }}")
            for point in points:
                idx = list(range(n, n + len(point)))
                n += len(point)
                args = ", ".join(f"x[{i}]" for i in idx)
                body.append(f"  out[{len(slots)}] = {alias}({args});")
                slots.append((_key(rule), alias, point, idx))
    src = (PRELUDE + "\n".join(usings) + "\nusing std::max;\nusing std::min;\nusing std::clamp;\n\n"
           "void math_rules(const double* x, double* out) {\n" + "\n".join(body) + "\n}\n")
    return src, slots, n


SOURCE, SLOTS, N_X = _build()


def _fd(ref, point, i):
    up, down = list(point), list(point)
    up[i] += H
    down[i] -= H
    return (ref(*up) - ref(*down)) / (2 * H)


@pytest.fixture(scope="module")
def grads():
    """dx for every slot, from one call of the compiled pullback."""
    g = torchclad.gradient(SOURCE, "math_rules", wrt="x")
    x = torch.zeros(N_X, dtype=torch.float64)
    for _, _, point, idx in SLOTS:
        x[idx] = torch.tensor(point, dtype=torch.float64)
    out = torch.zeros(len(SLOTS), dtype=torch.float64)
    (dx,) = g(x, out, grad_outputs={"out": torch.ones(len(SLOTS), dtype=torch.float64)})
    return dx


def test_every_rule_has_points():
    keys = [_key(r) for r in rules.RULES]
    missing = [k for k in keys if not POINTS.get(k, (None, []))[1]]
    stale = sorted(set(POINTS) - set(keys))
    assert not missing, f"rules without finite-difference points in POINTS: {missing}"
    assert not stale, f"POINTS names rules that are not in the table: {stale}"


def test_every_alias_is_looked_up_to_its_rule():
    for rule in rules.RULES:
        for alias in rule.names:
            assert rules.lookup(alias) is rule, alias


def test_kernel_calls_every_alias():
    spelled = {alias for _, alias, _, _ in SLOTS}
    assert spelled == {a for r in rules.RULES for a in r.names}


@pytest.mark.parametrize("key", [_key(r) for r in rules.RULES])
def test_rule_matches_finite_differences(grads, key):
    ref, _ = POINTS[key]
    rule = rules.lookup(key)
    bad = []
    checked = 0
    for rkey, alias, point, idx in SLOTS:
        if rkey != key:
            continue
        rel, abs_ = (1e-5, 1e-6) if _is_float_spelling(rule, alias) else (1e-7, 1e-9)
        for i, xi in enumerate(idx):
            want = _fd(ref, point, i)
            got = float(grads[xi])
            checked += 1
            if not math.isclose(got, want, rel_tol=rel, abs_tol=abs_):
                bad.append(f"{alias}{point} d/dx{i}: pullback {got!r}, finite difference {want!r}")
    assert checked == len(rule.names) * len(POINTS[key][1]) * len(rule.pullbacks)
    assert not bad, "\n".join(bad)
