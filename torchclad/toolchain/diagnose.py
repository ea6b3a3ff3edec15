"""The compiler's first error, said in the user's terms.

A kernel's translation unit is the runtime include, the user's source under
``#line 1 "<their file>"``, the generated derivatives under ``#line 1 "<generated>"`` and the C
entry points (:mod:`torchclad.toolchain.capi`). g++ and clang print every error and a trail of
notes (several KB for one template mistake); :func:`first_error` keeps the first error with its
source line and caret, and :func:`explain` words it for the user: at their file and line when
the error is in their code (or an instantiation of it reached from there), as a fault of the
generated code otherwise -- never by the generated code's file name. The full log stays in
the kept build directory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Diagnostic", "first_error", "explain"]

_LOC = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:(?P<col>\d+):)?\s*(?P<rest>.*)$")
_ERROR = re.compile(r"^(?:fatal )?error:\s*(?P<msg>.*)$")
_SNIPPET = re.compile(r"^\s*(\d+\s*)?\|")
_WITH = re.compile(r"\[with (?P<what>[^\]]+)\]")


@dataclass(frozen=True)
class Diagnostic:
    """One compiler error: where (``file`` as the compiler named it, ``line``, ``col``), the
    message, up to two lines of source and caret, and ``user_line``: a line of the user's file
    the error was reached from (an instantiation's "required from"), if any."""

    file: str
    line: int
    col: int
    message: str
    snippet: tuple
    user_line: int | None = None
    instantiated: str = ""


def first_error(stderr: str, user_file: str) -> Diagnostic | None:
    """The first ``error:`` of a g++ / clang++ log (None if there is none, e.g. a link error)."""
    lines = stderr.splitlines()
    for i, text in enumerate(lines):
        m = _LOC.match(text)
        if not m:
            continue
        e = _ERROR.match(m.group("rest"))
        if not e:
            continue
        snippet = []
        for nxt in lines[i + 1:i + 3]:
            if not _SNIPPET.match(nxt):
                break
            snippet.append(nxt.rstrip())
        user_line, inst = _context(lines[:i], user_file)
        return Diagnostic(m.group("file"), int(m.group("line")), int(m.group("col") or 0),
                          e.group("msg").strip(), tuple(snippet), user_line, inst)
    return None


def _context(before: list[str], user_file: str) -> tuple[int | None, str]:
    """The user-file line and the ``[with T = ...]`` of the instantiation notes that lead up to
    an error (the lines g++ prints just before it, after the previous error)."""
    user_line, inst = None, ""
    for text in reversed(before):
        m = _LOC.match(text)
        if m and _ERROR.match(m.group("rest")):
            break  # an earlier error's trail
        w = _WITH.search(text)
        if w and not inst:
            inst = w.group("what")
        if m and m.group("file") == user_file and user_line is None:
            user_line = int(m.group("line"))
        elif text.startswith(f"{user_file}:") and user_line is None:
            head = text[len(user_file) + 1:].split(":", 1)[0]
            if head.isdigit():
                user_line = int(head)
    return user_line, inst


def _snippet(source: str, line: int, col: int) -> tuple:
    """The user's source line and a caret under ``col``, as g++ shows them (it cannot: the file
    it names is the user's, not on disk)."""
    lines = source.splitlines()
    if not 1 <= line <= len(lines):
        return ()
    text = lines[line - 1].expandtabs(1)
    gutter = f"{line:>5} | "
    return (gutter + text, " " * (len(gutter) - 2) + "| " + " " * max(col - 1, 0) + "^")


def explain(d: Diagnostic | None, *, user_file: str, function: str, scalar: str,
            other_ok: str | None, log: str, source: str = "") -> str:
    """The message of a failed build of ``function`` for ``scalar`` (``other_ok``: the other
    scalar type, when its build compiled). ``log``: where the full compiler output is;
    ``source``: the user's source text (for the line under the error)."""
    only = (f" (with T = {scalar}; the {other_ok} build compiled)" if other_ok
            else f" (building for {scalar})" if scalar else "")
    if d is None:
        return (f"{user_file}: building '{function}' failed{only}, without a compiler error "
                f"(a link error?); the full log: {log}")
    snippet = "".join(f"\n{s}" for s in (d.snippet or _snippet(source, d.line, d.col)))
    if d.file == user_file:
        return f"{user_file}:{d.line}:{d.col}: error: {d.message}{only}{snippet}"
    if d.user_line is not None:
        return (f"{user_file}:{d.user_line}: error: {d.message}{only}, in code reached from "
                f"this line (the full log: {log})")
    return (f"{user_file}: the code torchclad generated for '{function}' does not compile"
            f"{only}: {d.message}. If the kernel compiles on its own, this is a torchclad bug; "
            f"the full log and source: {log}")
