"""libclang setup: a translation unit from source text, with the system compiler's headers.

PyPI's libclang ships no builtin headers (stddef.h, ...), so we ask the system C++
compiler where its include directories are and pass them as -isystem.
"""
from __future__ import annotations

import functools
import re
import os
import shlex
import shutil
import subprocess

import clang.cindex as ci

from ..errors import DiffError, Loc

# clang's CXBinaryOperatorKind / CXUnaryOperatorKind (clang-c/Index.h)
BINARY_OPS = {
    3: "*", 4: "/", 5: "%", 6: "+", 7: "-", 8: "<<", 9: ">>", 11: "<", 12: ">", 13: "<=",
    14: ">=", 15: "==", 16: "!=", 17: "&", 18: "^", 19: "|", 20: "&&", 21: "||", 22: "=",
    23: "*=", 24: "/=", 25: "%=", 26: "+=", 27: "-=", 28: "<<=", 29: ">>=", 30: "&=",
    31: "^=", 32: "|=", 33: ",",
}
UNARY_OPS = {1: "post++", 2: "post--", 3: "pre++", 4: "pre--", 5: "&", 6: "*", 7: "+", 8: "-",
             9: "~", 10: "!"}


def binary_op(cursor) -> str:
    return BINARY_OPS.get(ci.conf.lib.clang_getCursorBinaryOperatorKind(cursor), "?")


def unary_op(cursor) -> str:
    return UNARY_OPS.get(ci.conf.lib.clang_getCursorUnaryOperatorKind(cursor), "?")


def system_include_dirs(cxx: str | None = None) -> tuple:
    """The include search list of the system C++ compiler (`g++ -E -v`). ``cxx`` (default
    ``$CXX``) is split like a shell word list: ``CXX="g++ -march=native"`` is g++ with a flag."""
    cxx = cxx or os.environ.get("CXX", "").strip() or shutil.which("g++") or shutil.which("c++") or "c++"
    return _include_dirs(tuple(shlex.split(cxx)))


@functools.lru_cache(maxsize=None)
def _include_dirs(argv: tuple) -> tuple:
    try:
        out = subprocess.run([*argv, "-xc++", "-E", "-v", "-"], input="", capture_output=True,
                             text=True, timeout=60).stderr
    except (OSError, subprocess.SubprocessError):
        return ()
    dirs, on = [], False
    for line in out.splitlines():
        if line.startswith("#include <...> search starts here"):
            on = True
        elif line.startswith("End of search list"):
            break
        elif on:
            dirs.append(line.strip())
    return tuple(d for d in dirs if os.path.isdir(d))


def runtime_include_dir() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    for cand in (os.path.join(repo, "csrc", "runtime"), os.path.join(repo, "torchclad", "include")):
        if os.path.isdir(cand):
            return cand
    return os.path.join(repo, "csrc", "runtime")


# A pointer parameter marked TORCHCLAD_WRITE_ONCE promises: during one call each element is
# written at most once, and read only after it is written (an activation arena). The runtime
# header defines the macro away for the compiler; libclang sees it as an annotation.
WRITE_ONCE_MACRO = "TORCHCLAD_WRITE_ONCE"
WRITE_ONCE_ATTR = '__attribute__((annotate("torchclad::write_once")))'


def parse(source: str, filename: str = "kernel.cpp", extra_args: tuple = ()) -> ci.TranslationUnit:
    # no -fopenmp: libclang hides a loop under an OpenMP directive inside a captured
    # statement; pragmas are read from the text instead (see pragmas()).
    args = ["-x", "c++", "-std=c++17", "-Wno-unknown-pragmas", "-Wno-source-uses-openmp"]
    for d in system_include_dirs():
        args += ["-isystem", d]
    args += ["-I", runtime_include_dir(), f"-D{WRITE_ONCE_MACRO}={WRITE_ONCE_ATTR}"]
    args += list(extra_args)
    index = ci.Index.create()
    tu = index.parse(filename, args=args, unsaved_files=[(filename, source)],
                     options=ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD)
    errors = [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Error]
    if errors:
        d = errors[0]
        loc = Loc(d.location.file.name if d.location.file else filename, d.location.line,
                  d.location.column)
        more = f" (and {len(errors) - 1} more errors)" if len(errors) > 1 else ""
        raise DiffError(loc, f"the source does not compile: {d.spelling}{more}")
    return tu


def loc_of(cursor, filename: str) -> Loc:
    l = cursor.location
    return Loc(l.file.name if l.file else filename, l.line, l.column)


_PRAGMA = re.compile(r"^\s*#\s*pragma\s+(omp\b.*|torchclad\b.*)$")


def pragmas(source: str) -> dict:
    """{line of the statement a pragma applies to: pragma text} for omp/torchclad pragmas.
    A pragma applies to the next non-blank, non-comment line."""
    lines = source.splitlines()
    out = {}
    for i, line in enumerate(lines):
        m = _PRAGMA.match(line)
        if not m:
            continue
        text = re.sub(r"\s+", " ", m.group(1).strip())
        while text.endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text[:-1].strip() + " " + lines[i].strip()
        j = i + 1
        while j < len(lines) and (not lines[j].strip() or lines[j].strip().startswith("//")):
            j += 1
        out[j + 1] = text
    return out
