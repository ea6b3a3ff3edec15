"""Loops versioned on the null tests of optional pointer parameters (opt/unswitch.py).

A pointer parameter the function never assigns nor takes the address of has one value
throughout, so a loop that tests it (`if (bias != nullptr)`, `weight ? weight[i] : 1`) is
generated twice: without the tests when every pointer it tests is non-null, as written
otherwise. The gradients of both copies are checked against finite differences by the corpus
(`unswitch_null_*` cases: every pointer present, each one null, all null); the generated text
by the golden `unswitch_null`. These tests check what decides the versioning.
"""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

from torchclad.engine import differentiate

REPO = Path(__file__).resolve().parents[1]

# one optional bias, tested in the row loop
BIAS_ROWS = textwrap.dedent("""
    void bias_rows(double* out, const double* inp, const double* bias, int N, int C) {
      PROLOGUE
      for (int n = 0; n < N; n++) {
        for (int i = 0; i < C; i++) {
          double y = inp[n * C + i] * inp[n * C + i];
          if (bias != nullptr) y += bias[i] * inp[n * C + i];
          out[n * C + i] = y;
        }
      }
    }""")


def _function(code: str, name: str) -> str:
    """The text of one generated function (up to the next one)."""
    start = code.index(f"void {name}(")
    end = code.find("\nvoid ", start + 1)
    return code[start:end if end >= 0 else len(code)]


def _block(text: str, head: str) -> tuple:
    """(then, else) text of the `if` whose line is `head`, by indentation."""
    lines = text.splitlines()
    k = next(j for j, line in enumerate(lines) if line.strip() == head)
    indent = len(lines[k]) - len(lines[k].lstrip())
    close = [j for j in range(k + 1, len(lines))
             if len(lines[j]) - len(lines[j].lstrip()) == indent]
    then = "\n".join(lines[k + 1:close[0]])
    other = ""
    if lines[close[0]].strip() == "} else {":
        other = "\n".join(lines[close[0] + 1:close[1]])
    return then, other


def test_a_loop_testing_a_pointer_runs_without_the_test_when_it_is_not_null():
    d = differentiate(BIAS_ROWS.replace("PROLOGUE", ""), "bias_rows", "inp, bias")
    sweep = _function(d.code, "bias_rows_reverse_sweep")
    then, other = _block(sweep, "if (bias != nullptr) {")
    assert "_d_bias[i] +=" in then and "nullptr" not in then
    # the one test is false in the other copy: what it guards is gone
    assert other and "bias" not in other and "nullptr" not in other
    forw = _function(d.code, "bias_rows_reverse_forw")
    then, other = _block(forw, "if (bias != nullptr) {")
    assert "bias[i]" in then and "bias" not in other


def test_a_pointer_the_function_assigns_is_tested_in_the_loop():
    # (taking a pointer's address needs a pointer to a pointer, which the engine refuses)
    d = differentiate(BIAS_ROWS.replace("PROLOGUE", "if (C > 4) bias = nullptr;"),
                      "bias_rows", "inp, bias")
    sweep = _function(d.code, "bias_rows_reverse_sweep")
    assert "} else {" not in sweep, sweep
    loop = sweep[sweep.index("for (int i"):]
    assert "if (bias != nullptr)" in loop or "_tape.pop<bool>()" in loop, sweep


def test_only_null_tests_are_assumed_not_pointer_arithmetic():
    # layernorm's row pointers (inp + n * C) are pointers used in arithmetic, not tests
    src = (REPO / "csrc/kernels/layernorm.cpp").read_text()
    d = differentiate(src, "layernorm_forward", "inp, weight, bias",
                      filename=str(REPO / "csrc/kernels/layernorm.cpp"))
    tests = set(re.findall(r"if \(([^{}]*nullptr[^{}]*)\) \{", d.code))
    assert tests <= {"bias != nullptr && weight != nullptr", "bias != nullptr",
                     "weight != nullptr"}, tests
    sweep = _function(d.code, "layernorm_forward_reverse_sweep")
    then, other = _block(sweep, "if (bias != nullptr && weight != nullptr) {")
    # the copy run with both present: its adjoint stores are unconditional, the lanes plain
    assert "_d_bias[i] += _d_sh;" in then and "_d_weight[i] += _d_w;" in then
    assert "nullptr" not in then and "T w = weight[i];" in then
    # two pointers: the other copy keeps its tests (it runs when either is null)
    assert "if (bias != nullptr) {" in other and "weight != nullptr ? weight[i] : T(1)" in other


def test_a_folded_branch_keeps_the_type_of_the_conditional():
    d = differentiate((REPO / "tests/corpus/kernels/unswitch_null.cpp").read_text(),
                      "unswitch_null", filename="unswitch_null.cpp")
    sweep = _function(d.code, "unswitch_null_reverse_sweep")
    # `(scale != nullptr ? 1 : 0.5) / 2`: the int branch, cast to double (1 / 2 would be 0)
    assert "double k = (double)1 / 2;" in sweep and "double k = 0.5 / 2;" in sweep
