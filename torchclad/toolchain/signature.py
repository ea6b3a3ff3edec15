"""Signatures of the built-in kernels, recorded in ``torchclad._C`` at build time.

``torchclad._C.__torchclad_signatures__`` maps each kernel name to a :class:`Signature` with the
Derivative fields the bridge needs (``name``, ``params``, ``return_type``, ``wrt``, ``adjoints``,
``template_params``), so that using a built-in kernel does not run the engine again. The
extension stores them as JSON and calls :func:`loads` when it is imported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable

# One description of a parameter for the engine and the toolchain. torchclad.engine.derivative
# imports nothing else of the engine, so reading the signatures does not load libclang.
from torchclad.engine.derivative import REVERSE_KINDS
from torchclad.engine.derivative import ParamInfo as Param

__all__ = ["Param", "Signature", "dumps", "loads", "sweep_restores"]

def sweep_restores(derivative: Any) -> bool:
    """Whether the reverse sweeps of ``derivative`` (callees' included) may write memory the
    forward wrote -- restore overwritten values, re-run a checkpointed segment -- so that the
    bridge must keep a copy of the outputs around a sweep (torchclad.bridge.op). The engine's own
    answer, ``Derivative.sweep_writes_primal`` (worked out on its IR, checked against the memory
    for every corpus case); True for anything that does not say."""
    return bool(getattr(derivative, "sweep_writes_primal", True))


@dataclass(frozen=True)
class Signature:
    name: str
    params: tuple
    return_type: Param
    wrt: tuple
    adjoints: tuple
    template_params: tuple
    unit: str = ""  # torchclad/_generated/<unit>.cpp holds the generated code
    # the generated code may restore primal memory from the tape (sweep_restores); True when
    # the build did not record it
    restores: bool = True
    # the generated entry points (Derivative.kinds); the reverse mode's when not recorded
    kinds: tuple = REVERSE_KINDS
    # the assigning sweep's ((input adjoint, size: "N", "N*C" or ""), ...): Derivative.assign_extents
    assign_extents: tuple = ()
    # the int parameters that must be >= 0 for it: Derivative.assign_nonneg
    assign_nonneg: tuple = ()
    # its input adjoints that are a copy of a seed: Derivative.assign_copies
    assign_copies: tuple = ()


def _param(p: Any, template: tuple) -> dict:
    return {
        "name": p.name,
        "base": p.base,
        "pointer": int(p.pointer),
        "const": bool(p.const),
        "differentiable": bool(p.differentiable),
        "template": list(getattr(p, "template", template)),
        **({"reference": True} if getattr(p, "reference", False) else {}),
    }


def dumps(units: Iterable[tuple[str, Iterable[Any]]]) -> str:
    """JSON of the signatures of ``(unit, derivatives)`` pairs."""
    out = {}
    for unit, derivs in units:
        for d in derivs:
            t = tuple(d.template_params)
            out[d.name] = {
                "name": d.name,
                "params": [_param(p, t) for p in d.params],
                "return_type": _param(d.return_type, t),
                "wrt": list(d.wrt),
                "adjoints": list(getattr(d, "adjoints", None) or d.wrt),
                "template_params": list(t),
                "unit": unit,
                "restores": sweep_restores(d),
                "kinds": list(getattr(d, "kinds", None) or REVERSE_KINDS),
                "assign_extents": [list(x) for x in getattr(d, "assign_extents", ())],
                "assign_nonneg": list(getattr(d, "assign_nonneg", ())),
                "assign_copies": [list(x) for x in getattr(d, "assign_copies", ())],
            }
    return json.dumps(out, sort_keys=True, separators=(",", ":"))


def _load_param(p: dict) -> Param:
    return Param(**{**p, "template": tuple(p["template"])})


def loads(text: str) -> dict[str, Signature]:
    data = json.loads(text)
    return {
        name: Signature(
            name=s["name"],
            params=tuple(_load_param(p) for p in s["params"]),
            return_type=_load_param(s["return_type"]),
            wrt=tuple(s["wrt"]),
            adjoints=tuple(s["adjoints"]),
            template_params=tuple(s["template_params"]),
            unit=s.get("unit", ""),
            restores=bool(s.get("restores", True)),
            kinds=tuple(s.get("kinds", REVERSE_KINDS)),
            assign_extents=tuple(tuple(x) for x in s.get("assign_extents", ())),
            assign_nonneg=tuple(s.get("assign_nonneg", ())),
            assign_copies=tuple(tuple(x) for x in s.get("assign_copies", ())),
        )
        for name, s in data.items()
    }
