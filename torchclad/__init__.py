"""torchclad: compiler-generated (source-transformation AD) gradients for PyTorch.

Heavy pieces (torch, libclang, the build machinery) are imported lazily: ``torchclad.gradient``
and ``torchclad.ops`` import them inside their functions, so ``import torchclad.build`` or
``import torchclad.ad`` stays cheap.
"""

from __future__ import annotations

__version__ = "0.1.0"

# The submodule torchclad/gradient.py has the same name as the public function. Importing the
# submodule here, then binding the name to the function, keeps ``torchclad.gradient`` the
# function: later ``import torchclad.gradient`` finds the module in sys.modules and does not
# rebind the package attribute. gradient.py has no heavy top-level imports.
from torchclad.gradient import Gradient, gradient  # noqa: E402

__all__ = ["gradient", "function", "Gradient", "__version__"]


def function(source, name, *, inputs, outputs, sizes=None):
    """Make a differentiable torch op from a C++ kernel; see :func:`torchclad.ops.function`."""
    from torchclad.ops import function as _function

    return _function(source, name, inputs=inputs, outputs=outputs, sizes=sizes)


def __getattr__(attr):
    # Lazy access to submodules: torchclad.nn, torchclad.testing, ...
    if attr in ("nn", "ops", "testing", "cli", "demo", "ad", "build"):
        import importlib

        return importlib.import_module(f"torchclad.{attr}")
    raise AttributeError(f"module 'torchclad' has no attribute {attr!r}")
