"""Golden tests of generated code (Clad's CHECK-NEXT style): the engine's output for each case
in tests/golden/cases.txt must equal tests/golden/<case>.expected.cpp byte for byte, and each
case also runs numerically (corpus cases through the corpus harness; the built-in GELU through
tests/test_nn_gelu.py). Refresh after an intended change with `pytest --update-golden` and
review the diff.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from torchclad.engine import differentiate
from torchclad.engine.driver import GENERATED_FILE

TESTS = Path(__file__).resolve().parent
GOLDEN = TESTS / "golden"
sys.path.insert(0, str(TESTS))


def _cases():
    out = []
    for line in (GOLDEN / "cases.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, src, fn, wrt = line.split()
        out.append((name, (TESTS / src).resolve(), fn, None if wrt == "-" else wrt))
    return out


CASES = _cases()


@pytest.mark.parametrize("name,src,fn,wrt", CASES, ids=[c[0] for c in CASES])
def test_golden(request, name, src, fn, wrt):
    code = differentiate(src.read_text(), fn, wrt, filename=src.name).code
    check_golden(request, GOLDEN / f"{name}.expected.cpp", name, code)


def check_golden(request, expected: Path, name: str, code: str) -> None:
    """``code`` equals the golden file ``expected`` (rewritten with --update-golden)."""
    if request.config.getoption("--update-golden"):
        expected.write_text(code)
    assert expected.exists(), f"no golden file {expected.name}; run pytest --update-golden"
    want = expected.read_text()
    if code != want:
        import difflib
        diff = "".join(difflib.unified_diff(want.splitlines(True), code.splitlines(True),
                                            "expected", "generated", n=2))
        pytest.fail(f"generated code for {name} changed:\n{diff[:6000]}", pytrace=False)


def test_golden_is_deterministic():
    name, src, fn, wrt = CASES[-3]
    a = differentiate(src.read_text(), fn, wrt, filename=src.name).code
    b = differentiate(src.read_text(), fn, wrt, filename=src.name).code
    assert a == b


def test_at_least_twenty_golden_cases():
    assert len(CASES) >= 20


@pytest.mark.parametrize("name,src", [(c[0], c[1]) for c in CASES if "corpus/" in str(c[1])],
                         ids=[c[0] for c in CASES if "corpus/" in str(c[1])])
def test_golden_case_runs_in_the_corpus(name, src):
    """Every golden corpus case is also a numeric case: tests/test_corpus.py runs it against
    finite differences at -O0/-O2, analyses on/off, combined and split (the built-in GELU is
    run by tests/test_nn_gelu.py)."""
    import corpus_harness as H
    case = next((c for c in H.CASES if c.name == name), None)
    assert case is not None, f"golden case {name} is not in tests/corpus/cases.py"
    assert (H.KERNELS / case.file).resolve() == src


def _instantiations(d) -> str:
    """Explicit instantiations so that template code is type-checked for float and double."""
    if not d.template_params:
        return ""
    out = []
    for scalar in ("float", "double"):
        for name, _ in d.functions:
            if name.startswith(d.name + "_"):
                out.append(f"template void {name}<{scalar}>({_signature(d, name, scalar)});")
    return "\n".join(out) + "\n"


def _signature(d, name, scalar):
    ps = [p.c_type(scalar) for p in d.params]
    by = {p.name: p for p in d.params}
    seed = [d.return_type.c_type(scalar)] if d.return_type.differentiable else []
    adj = [by[a].c_type(scalar).replace("const ", "") + ("" if by[a].pointer else "*")
           for a in d.adjoints]
    if name.endswith("_reverse_forw"):
        return ", ".join(ps + ["torchclad::Tape&"])
    if name.endswith("_reverse_sweep") or name.endswith("_reverse_sweep_assign"):
        return ", ".join(ps + seed + adj + ["torchclad::Tape&"])
    if name.endswith("_grad"):
        return ", ".join(ps + adj)
    return ", ".join(ps + seed + adj)


@pytest.mark.parametrize("name,src,fn,wrt", CASES, ids=[c[0] for c in CASES])
def test_generated_code_compiles_without_warnings(tmp_path, name, src, fn, wrt):
    import subprocess
    d = differentiate(src.read_text(), fn, wrt, filename=src.name)
    text = d.translation_unit()
    # the warnings of generated code are told apart by the file name its #line gives it
    assert re.search(rf'^#line \d+ "{re.escape(GENERATED_FILE)}"$', text, re.M), text[-2000:]
    tu = tmp_path / f"{name}.cpp"
    tu.write_text(text + "\n" + _instantiations(d))
    runtime = TESTS.parent / "csrc" / "runtime"
    r = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-Wall", "-fopenmp",
                        "-I", str(runtime), str(tu)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]
    # the user's kernel may warn (the corpus has deliberately unused locals); generated code,
    # which the TU names GENERATED_FILE through #line, must not
    ours = [line for line in r.stderr.splitlines()
            if line.startswith(GENERATED_FILE + ":") and ": warning" in line]
    assert not ours, "\n".join(ours)
