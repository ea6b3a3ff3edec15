"""Forward mode over the AD corpus (issue "Every derivative from one kernel"): every kernel's
generated `f_pushforward` against finite differences of the primal along a random direction
(or the case's exact gradient, through the JVP/VJP identity), and its `f_pullback_pushforward`
-- forward mode over the generated pullback -- against finite differences of that pullback.
Built at -O0 and -O2 with the engine's analyses on and off. The machinery is in
tests/corpus_forward.py (over tests/corpus_harness.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus_forward as F  # noqa: E402
import corpus_harness as H  # noqa: E402

CASES = H.CASES
ANALYSES = [pytest.param(True, id="analyses"), pytest.param(False, id="no-analyses")]
OPTS = [pytest.param(o, id=o[1:]) for o in H.OPT_LEVELS]
#: no forward derivative exists: the callee's body is not differentiable (goto) and it has a
#: custom pullback only (the test below checks the diagnostic says so)
NO_FORWARD = {"custom_pullback_opaque"}


@pytest.fixture(scope="module")
def session(request):
    selected = {item.callspec.params["case"].name for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec")
                and "case" in item.callspec.params}
    yield F.ForwardSession(only=selected or None)


def _passes(check, *args):
    try:
        return check(*args)
    except H.CorpusFailure as e:
        message = str(e)
    pytest.fail(message, pytrace=False)


FORWARD_CASES = [c for c in CASES if c.name not in NO_FORWARD]


@pytest.mark.parametrize("analyses", ANALYSES)
@pytest.mark.parametrize("opt", OPTS)
@pytest.mark.parametrize("case", FORWARD_CASES, ids=lambda c: c.name)
def test_pushforward(session, case, opt, analyses):
    _passes(F.check_forward, session, case, opt, analyses)


#: the cases whose point has a second derivative (F.SECOND_UNDEFINED: at a kink the pullback
#: jumps, and finite differences of it are no oracle; their first derivatives are checked above)
SECOND_CASES = [c for c in FORWARD_CASES if c.name not in F.SECOND_UNDEFINED]


@pytest.mark.parametrize("analyses", ANALYSES)
@pytest.mark.parametrize("opt", OPTS)
@pytest.mark.parametrize("case", SECOND_CASES, ids=lambda c: c.name)
def test_pullback_pushforward(session, case, opt, analyses):
    _passes(F.check_second, session, case, opt, analyses)


def test_no_forward_derivative_is_a_clear_error():
    from torchclad.engine import DiffError, differentiate

    case = H.CASES_BY_NAME["custom_pullback_opaque"]
    src = (H.KERNELS / case.file).read_text()
    with pytest.raises(DiffError, match=r"custom_pullback_opaque.cpp:\d+:\d+: goto .*"
                                        r"forward mode needs clad::custom_derivatives::"
                                        r"clampish_pushforward"):
        differentiate(src, case.fn, case.wrt, filename=case.file, modes=("forward",))


def test_global_written_by_a_call_without_tangents_is_refused():
    """A call none of whose arguments has a tangent runs the primal callee: when that callee
    writes a global with a tangent, forward mode refuses rather than leave the tangent stale."""
    from torchclad.engine import DiffError, differentiate

    src = ("double g = 1;\nvoid setg(double a) { g = a; }\n"
           "double f(double x) { setg(2.0); g *= x; return g * x; }\n")
    with pytest.raises(DiffError, match=r"kernel.cpp:3:22: forward mode .* does not support a "
                                        r"call of 'setg', which touches a non-const global"):
        differentiate(src, "f", "x", modes=("forward",))


def test_mutual_recursion_is_a_clear_error():
    """A function calling itself is differentiated (the corpus case `recursion`); two that call
    each other are refused at the call that closes the cycle."""
    from torchclad.engine import DiffError, differentiate

    src = ("double g(double x, int n);\n"
           "double f(double x, int n) { if (n <= 0) return x; return g(x * x, n - 1); }\n"
           "double g(double x, int n) { return 0.5 * f(x, n) + x; }\n"
           "double top(double x) { return f(x, 3); }\n")
    for modes in (("forward",), ("second",)):
        with pytest.raises(DiffError, match=r"kernel.cpp:3:\d+: mutual recursion \(f -> g -> f\) "
                                            r"is not supported in forward mode"):
            differentiate(src, "top", "x", modes=modes)
