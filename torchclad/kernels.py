"""Registry of the built-in kernels.

Every entry names a function in a file under ``csrc/kernels/``. At install time ``setup.py`` runs
the engine (:func:`torchclad.ad.differentiate`) on each entry, writes the translation units to
``torchclad/_generated/`` and compiles them, with the pybind11 glue, into ``torchclad._C``.
Entries that share a file share one translation unit.

For a kernel ``f`` and a scalar suffix ``sfx`` (``f32``, ``f64``; a template gets both) the
extension has ``f_{sfx}``, ``f_pullback_{sfx}``, ``f_reverse_forw_{sfx}``,
``f_reverse_sweep_{sfx}`` and, for a non-void ``f``, ``f_grad_{sfx}``; see
:mod:`torchclad.build.glue` for the calling convention.

This module is imported by ``setup.py`` from the source tree, so it must not import torch or any
part of torchclad that needs the compiled extension.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["KernelSpec", "KERNELS", "kernel_dir", "by_file"]


@dataclass(frozen=True)
class KernelSpec:
    """One built-in kernel: ``name`` in ``csrc/kernels/<file>``, differentiated w.r.t. ``wrt``.

    ``wrt`` follows :func:`torchclad.ad.differentiate`: ``None`` means every floating parameter.
    """

    file: str
    name: str
    wrt: tuple[str, ...] | None = None

    @property
    def unit(self) -> str:
        """Name of the translation unit (and of ``_generated/<unit>.cpp``): the file's stem."""
        return Path(self.file).stem


KERNELS: tuple[KernelSpec, ...] = (
    KernelSpec(file="gelu.cpp", name="gelu_forward", wrt=("inp",)),
)


def kernel_dir() -> Path:
    """``csrc/kernels`` of the source tree this package was installed from (editable install)."""
    return Path(__file__).resolve().parent.parent / "csrc" / "kernels"


def by_file(specs: tuple[KernelSpec, ...] = KERNELS) -> dict[str, list[KernelSpec]]:
    """Group specs by source file, keeping registry order (one translation unit per file)."""
    groups: dict[str, list[KernelSpec]] = {}
    for spec in specs:
        groups.setdefault(spec.file, []).append(spec)
    return groups
