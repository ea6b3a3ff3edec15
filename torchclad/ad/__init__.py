"""torchclad.ad — the source-transformation AD engine (reverse mode, Clad conventions).

    from torchclad.ad import differentiate
    d = differentiate(source, "f", wrt="x, y")
    print(d.code)

See docs/internals.md for the seam to the build and the bridge, docs/engine.md for the design.
"""
from .driver import Derivative, Engine, Options, ParamInfo, combine, differentiate
from .errors import DiffError, Loc

__all__ = ["differentiate", "Engine", "Options", "Derivative", "ParamInfo", "combine",
           "DiffError", "Loc"]
