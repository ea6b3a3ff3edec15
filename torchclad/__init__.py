"""torchclad: compiler-generated (source-transformation AD) gradients for PyTorch.

The package in layers, in the order data flows through them (docs/internals.md):

- ``torchclad.engine``    C++ source -> generated derivative source (libclang, no torch)
- ``torchclad.toolchain`` generated source -> compiled, cached extension module (no torch)
- ``torchclad.bridge``    compiled module -> torch ops, autograd, ``gradient`` / ``function``
- ``torchclad.builtin``   the package's own kernels (``csrc/kernels``) and their ops
- ``torchclad.nn``        torch.nn-style modules over the built-in ops, GPT-2

Heavy pieces (torch, libclang, the compiler) are imported lazily, inside the functions that
need them, so ``import torchclad`` and ``import torchclad.engine`` stay cheap.
"""

from __future__ import annotations

__version__ = "0.1.0"

from torchclad.bridge.gradient import Gradient, gradient  # no heavy top-level imports

__all__ = ["gradient", "function", "differentiate", "jacobian", "hessian", "aot", "Gradient",
           "__version__"]


def function(source, name, *, inputs, outputs, sizes=None, input_shapes=None, debug=False,
             extra_cflags=(), filename=None):
    """Make a differentiable torch op from a C++ kernel; see
    :func:`torchclad.bridge.userop.function`."""
    from torchclad.bridge.userop import function as _function

    return _function(source, name, inputs=inputs, outputs=outputs, sizes=sizes,
                     input_shapes=input_shapes, debug=debug, extra_cflags=extra_cflags,
                     filename=filename)


def differentiate(source, name, arg):
    """Forward mode, like ``clad::differentiate``; see :func:`torchclad.bridge.forward.differentiate`."""
    from torchclad.bridge.forward import differentiate as _differentiate

    return _differentiate(source, name, arg)


def jacobian(source, name, wrt=None):
    """The Jacobian matrix, like ``clad::jacobian``; see :func:`torchclad.bridge.forward.jacobian`."""
    from torchclad.bridge.forward import jacobian as _jacobian

    return _jacobian(source, name, wrt)


def hessian(source, name, wrt=None):
    """The Hessian matrix, like ``clad::hessian``; see :func:`torchclad.bridge.forward.hessian`."""
    from torchclad.bridge.forward import hessian as _hessian

    return _hessian(source, name, wrt)


def aot(source, name, wrt=None, *, inputs, outputs, sizes=None, checks=(), indices=None,
        out_dir, filename="kernel.cpp", op_name=None):
    """Write a C++ kernel as a LibTorch op for C++ programs (``torchclad aot``): the spec as in
    :func:`function`, with expressions (strings) instead of lambdas; see
    :mod:`torchclad.toolchain.libtorch_spec`. Returns the files written (header, source, ...)."""
    from torchclad.toolchain.libtorch import generate
    from torchclad.toolchain.libtorch_spec import Spec

    spec = Spec.of({"inputs": inputs, "outputs": outputs, "sizes": sizes or {},
                    "checks": list(checks), "indices": indices or {}}, where="torchclad.aot")
    return generate(source, name, wrt, spec=spec, out_dir=out_dir, filename=filename,
                    op_name=op_name)


def __getattr__(attr):
    # Lazy access to submodules: torchclad.nn, torchclad.testing, ...
    if attr in ("nn", "testing", "cli", "demo", "engine", "toolchain", "bridge", "builtin"):
        import importlib

        return importlib.import_module(f"torchclad.{attr}")
    raise AttributeError(f"module 'torchclad' has no attribute {attr!r}")
