"""The built-in kernels (``torchclad.kernels.KERNELS``, compiled AOT into ``torchclad._C``) as ops.

Each op is made by the same machinery as :func:`torchclad.function` (:mod:`torchclad.ops`), from
the kernel's signature and the bindings in ``torchclad._C``. Registered once, at the import of
:mod:`torchclad.nn`, under their kernel names: ``torch.ops.torchclad.gelu_forward``.
"""

from __future__ import annotations

import functools
from typing import Any

from torchclad import kernels
from torchclad._kernel import Kernel
from torchclad.ops import KernelOp, make_op


def _extension():
    try:
        from torchclad import _C
    except ImportError as e:
        raise ImportError(
            "torchclad._C (the built-in kernels, compiled at install time) is missing; "
            "install torchclad with `make install` (pip install --no-build-isolation -e .)"
        ) from e
    return _C


@functools.lru_cache(maxsize=None)
def _signature(name: str) -> Any:
    """The Derivative-like signature of built-in kernel ``name``, as ``torchclad._C`` was built.

    ``_C.__torchclad_signatures__`` is used when the build records it; otherwise the engine
    re-derives it from the kernel source (the same deterministic run the install step made).
    """
    spec = next((s for s in kernels.KERNELS if s.name == name), None)
    if spec is None:
        raise KeyError(f"{name} is not a built-in kernel (see torchclad.kernels.KERNELS)")
    recorded = getattr(_extension(), "__torchclad_signatures__", None)
    if recorded is not None and name in recorded:
        return recorded[name]
    from torchclad import ad

    source = (kernels.kernel_dir() / spec.file).read_text()
    wrt = None if spec.wrt is None else list(spec.wrt)
    return ad.differentiate(source, name, wrt, filename=f"csrc/kernels/{spec.file}")


def builtin_op(name: str, *, inputs, outputs, sizes=None) -> KernelOp:
    """The op ``torchclad::<name>`` for built-in kernel ``name``."""
    return make_op(Kernel(_signature(name), _extension()), name,
                   inputs=inputs, outputs=outputs, sizes=sizes)


def _numel(x):
    return x.numel()


def _same_shape(x):
    return x.shape


# B = batch, T = time, C = channels; elementwise kernels see N = B * T * C.
gelu = builtin_op("gelu_forward", inputs=["inp"], outputs={"out": _same_shape},
                  sizes={"N": _numel}).op
