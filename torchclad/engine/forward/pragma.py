"""OpenMP clauses of a forward-mode loop: each variable a data-sharing or reduction clause names
gets its tangent named beside it (`reduction(+: s)` -> `reduction(+: s, _d_s)`, an array
section `_d_w[:C]` keeps its section). A tangent loop has no tape and each iteration writes
tangents exactly where it writes values, so a parallel primal loop stays parallel."""
from __future__ import annotations

import re
from typing import Callable

_CLAUSE = re.compile(r"\b(private|firstprivate|lastprivate|shared|reduction)\s*"
                     r"\(([^()]*(?:\([^()]*\)[^()]*)*)\)")
_ITEM = re.compile(r"^\s*([A-Za-z_]\w*)(.*)$", re.S)


def tangent_pragma(pragma: str, tangent_of: Callable[[str], "str | None"]) -> str:
    """`pragma` with the tangent of every listed variable that has one (tangent_of(name) ->
    its tangent's name, or None) added to the same clause."""

    def clause(m: re.Match) -> str:
        kind, body = m.group(1), m.group(2)
        head, sep, items = body.partition(":") if kind == "reduction" else ("", "", body)
        out = [x.strip() for x in items.split(",") if x.strip()]
        extra = []
        for item in out:
            im = _ITEM.match(item)
            t = tangent_of(im.group(1)) if im else None
            if t is not None and t + im.group(2) not in out:
                extra.append(t + im.group(2))
        if not extra:
            return m.group(0)
        listed = ", ".join(out + extra)
        return f"{kind}({head}{sep} {listed})" if sep else f"{kind}({listed})"

    return _CLAUSE.sub(clause, pragma)
