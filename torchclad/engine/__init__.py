"""torchclad.engine — the source-transformation AD engine (reverse mode, Clad conventions).

    from torchclad.engine import differentiate
    d = differentiate(source, "f", wrt="x, y")
    print(d.code)

See docs/internals.md for the seam to the build and the bridge, docs/engine.md for the design.
`Derivative`, `ParamInfo`, `combine` and the errors import without libclang (the toolchain
reads built-in kernels' signatures with them); the rest loads the engine on first use.
"""
from .derivative import Derivative, ParamInfo, combine
from .errors import DiffError, Loc, ParallelWarning

__all__ = ["differentiate", "Engine", "Options", "Derivative", "ParamInfo", "combine",
           "DiffError", "Loc", "ParallelWarning"]


def __getattr__(attr):
    if attr in ("differentiate", "Engine", "Options"):
        from . import driver

        return getattr(driver, attr)
    raise AttributeError(f"module 'torchclad.engine' has no attribute {attr!r}")
