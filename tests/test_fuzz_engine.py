"""Fuzz the engine with mutated corpus kernels (fixed seed): for every mutant it either reports
a DiffError or emits a derivative that compiles. An internal exception (KeyError, TypeError...)
or generated code that does not compile is a bug."""
from __future__ import annotations

import random
import re
import subprocess
from pathlib import Path

import pytest

from torchclad.ad import DiffError, differentiate

TESTS = Path(__file__).resolve().parent
KERNELS = sorted((TESTS / "corpus" / "kernels").glob("*.cpp"))
RUNTIME = TESTS.parent / "csrc" / "runtime"
N_MUTANTS = 32


def _functions(src: str) -> list:
    return re.findall(r"^(?:template <typename T>\s*)?(?:static )?(?:double|float|void|T) "
                      r"(\w+)\(", src, re.M)


def _mutate(src: str, rng: random.Random) -> str:
    lines = src.splitlines()
    body = [i for i, l in enumerate(lines) if l.startswith("  ") and l.strip()]
    if not body:
        return src
    i = rng.choice(body)
    kind = rng.randrange(6)
    line = lines[i]
    if kind == 0:                                     # drop a statement line
        lines[i] = ""
    elif kind == 1:                                   # duplicate it
        lines.insert(i, line)
    elif kind == 2:                                   # swap an operator
        ops = [m.start() for m in re.finditer(r"[+\-*/](?![=+\-])", line)]
        if ops:
            k = rng.choice(ops)
            lines[i] = line[:k] + rng.choice("+-*/") + line[k + 1:]
    elif kind == 3:                                   # change a literal
        lines[i] = re.sub(r"\b\d+\.\d+\b", lambda m: str(float(m.group()) * 3), line, count=1)
    elif kind == 4:                                   # wrap the statement in a loop
        lines[i] = "  for (int _q = 0; _q < 2; ++_q) {" + line.strip() + "}"
    else:                                             # turn = into +=
        lines[i] = re.sub(r"(?<![=<>!+\-*/])=(?!=)", "+=", line, count=1)
    return "\n".join(lines)


def _mutants():
    rng = random.Random(20261121)
    out = []
    while len(out) < N_MUTANTS:
        path = rng.choice(KERNELS)
        src = path.read_text()
        fns = _functions(src)
        if not fns:
            continue
        out.append((f"{path.stem}-{len(out)}", _mutate(src, rng), fns[-1]))
    return out


MUTANTS = _mutants()


@pytest.mark.parametrize("name,src,fn", MUTANTS, ids=[m[0] for m in MUTANTS])
def test_mutant_reports_or_compiles(tmp_path, name, src, fn):
    try:
        d = differentiate(src, fn, filename=f"{name}.cpp")
    except DiffError:
        return                                        # a clear diagnostic is a fine answer
    tu = tmp_path / "tu.cpp"
    tu.write_text(d.translation_unit())
    r = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-fopenmp", "-w", "-I", str(RUNTIME),
                        str(tu)], capture_output=True, text=True)
    generated = [l for l in r.stderr.splitlines() if l.startswith("torchclad-generated.cpp")]
    assert not generated, "\n".join(generated[:8])
