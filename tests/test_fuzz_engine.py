"""Fuzz the engine with mutated corpus kernels (fixed seed): for every mutant it either reports
a located DiffError or emits a derivative that compiles. An internal exception (KeyError,
TypeError...) or generated code that does not compile is a bug. Every mutant differs from its
kernel, and at least a third of them must reach the compiler (else a run in which the engine
rejects everything would pass)."""
from __future__ import annotations

import functools
import random
import re
import subprocess
from pathlib import Path

import pytest

from torchclad.engine import DiffError, differentiate
from torchclad.engine.driver import GENERATED_FILE

TESTS = Path(__file__).resolve().parent
KERNELS = sorted((TESTS / "corpus" / "kernels").glob("*.cpp"))
RUNTIME = TESTS.parent / "csrc" / "runtime"
N_MUTANTS = 48


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
        mutant = _mutate(src, rng)
        if not fns or mutant == "\n".join(src.splitlines()):    # no function, or no change
            continue
        out.append((f"{path.stem}-{len(out)}", mutant, fns[-1]))
    return out


MUTANTS = _mutants()


@functools.cache
def _derive(name: str, src: str, fn: str):
    """The mutant's derivative, or its DiffError."""
    try:
        return differentiate(src, fn, filename=f"{name}.cpp")
    except DiffError as e:
        return e


@pytest.mark.parametrize("name,src,fn", MUTANTS, ids=[m[0] for m in MUTANTS])
def test_mutant_reports_or_compiles(tmp_path, name, src, fn):
    d = _derive(name, src, fn)
    if isinstance(d, DiffError):                      # a clear diagnostic is a fine answer
        assert re.match(rf"{re.escape(name)}\.cpp:\d+:\d+: ", str(d)), str(d)
        return
    text = d.translation_unit()
    # compiler messages about generated code name GENERATED_FILE (a #line in the TU)
    assert re.search(rf'^#line \d+ "{re.escape(GENERATED_FILE)}"$', text, re.M), text[-2000:]
    tu = tmp_path / "tu.cpp"
    tu.write_text(text)
    r = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-fopenmp", "-w", "-I", str(RUNTIME),
                        str(tu)], capture_output=True, text=True)
    generated = [l for l in r.stderr.splitlines() if l.startswith(GENERATED_FILE + ":")]
    assert not generated, "\n".join(generated[:8])
    assert r.returncode == 0, r.stderr[-4000:]        # the user's part compiles too: clang took it


def test_most_mutants_reach_the_compiler():
    derived = [m[0] for m in MUTANTS if not isinstance(_derive(*m), DiffError)]
    assert len(derived) >= N_MUTANTS // 3, f"only {derived} were differentiated"
