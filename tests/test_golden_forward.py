"""Golden tests of generated forward-mode code (Clad's CHECK-NEXT style): the engine's output
for each case in tests/golden/forward/cases.txt must equal <case>.expected.cpp byte for byte
and compile without warnings; the corpus cases also run numerically (tests/test_corpus_forward.py
checks every corpus kernel's f_pushforward and f_pullback_pushforward against finite
differences; the built-in GELU's by tests/test_forward_api.py). Refresh after an intended change
with `pytest --update-golden` and review the diff.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from torchclad.engine import differentiate
from torchclad.engine.driver import GENERATED_FILE

TESTS = Path(__file__).resolve().parent
GOLDEN = TESTS / "golden" / "forward"
sys.path.insert(0, str(TESTS))
from test_golden import check_golden  # noqa: E402


def _cases():
    out = []
    for line in (GOLDEN / "cases.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, src, fn, wrt, modes = line.split()
        out.append((name, (TESTS / src).resolve(), fn, None if wrt == "-" else wrt, modes))
    return out


CASES = _cases()
IDS = [c[0] for c in CASES]


def _derive(src, fn, wrt, modes):
    return differentiate(src.read_text(), fn, wrt, filename=src.name, modes=(modes,))


@pytest.mark.parametrize("name,src,fn,wrt,modes", CASES, ids=IDS)
def test_golden_forward(request, name, src, fn, wrt, modes):
    check_golden(request, GOLDEN / f"{name}.expected.cpp", name, _derive(src, fn, wrt, modes).code)


def test_golden_forward_covers_the_modes():
    """Pushforwards of callees, pointers, loops, templates, OpenMP, a custom pushforward, and
    forward over reverse with a tape."""
    texts = {name: (GOLDEN / f"{name}.expected.cpp").read_text() for name in IDS}
    assert "double poly_scalar_darg0(double x, double y)" in texts["poly_scalar"]
    assert "clad::custom_derivatives::clampish_pushforward" in texts["custom_pushforward"]
    assert "#pragma omp parallel for" in texts["gelu_builtin"]
    assert "template <typename T>" in texts["llm_layernorm_t"]
    assert re.search(r"_tape\.pop<double>\(\);\n\s*\w+ = _tape\.pop<double>\(\)|"
                     r"= _tape\.pop<double>\(\);\n\s*\w+ = _tape\.pop<double>\(\)",
                     texts["while_loop_second"]), "a pop of a value is preceded by its tangent's"


@pytest.mark.parametrize("name,src,fn,wrt,modes", CASES, ids=IDS)
def test_forward_code_compiles_without_warnings(tmp_path, name, src, fn, wrt, modes):
    d = _derive(src, fn, wrt, modes)
    text = d.translation_unit()
    if d.template_params:        # instantiate every generated function for float and double
        for scalar in ("float", "double"):
            text += "\n".join(_instantiation(d, n, scalar) for n, _ in d.functions) + "\n"
    tu = tmp_path / f"{name}.cpp"
    tu.write_text(text)
    runtime = TESTS.parent / "csrc" / "runtime"
    r = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-Wall", "-fopenmp",
                        "-I", str(runtime), str(tu)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]
    ours = [line for line in r.stderr.splitlines()
            if line.startswith(GENERATED_FILE + ":") and ": warning" in line]
    assert not ours, "\n".join(ours)


def _instantiation(d, name: str, scalar: str) -> str:
    """An explicit instantiation of generated template function `name` for `scalar`."""
    m = re.search(rf"^(.*)\b{re.escape(name)}\((.*)\) {{$", d.code, re.M)
    sub = lambda t: re.sub(r"\bT\b", scalar, t)
    types = [sub(re.sub(r"\s*\b\w+$", "", p.strip())) for p in m.group(2).split(",") if p.strip()]
    return f"template {sub(m.group(1).strip())} {name}<{scalar}>({', '.join(types)});"
