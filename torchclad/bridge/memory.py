"""Where a kernel's arrays live: :class:`Memory` makes the buffers a call hands to C++.

The plain one (:data:`PLAIN`) makes ordinary tensors. A debug op (``torchclad.function(...,
debug=True)``) uses :class:`torchclad.bridge.guard.GuardedMemory`, whose buffers sit between
inaccessible pages so that an out-of-bounds access faults (and the fault names the array).
"""

from __future__ import annotations

import torch

__all__ = ["Memory", "PLAIN", "zero_fill"]


class Memory:
    """Buffers for a kernel call (contiguous tensors)."""

    guarded = False

    def copy(self, t: torch.Tensor) -> torch.Tensor:
        """A contiguous copy of ``t`` (the kernel may write it)."""
        return t.clone(memory_format=torch.contiguous_format)

    def readable(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` as the kernel reads it (contiguous; ``t`` itself when it is)."""
        return t.contiguous()

    def empty(self, shape, dtype: torch.dtype) -> torch.Tensor:
        return torch.empty(shape, dtype=dtype)

    def zeros(self, shape, dtype: torch.dtype) -> torch.Tensor:
        return torch.zeros(shape, dtype=dtype)


PLAIN = Memory()


def zero_fill(t: torch.Tensor) -> torch.Tensor:
    """Zero ``t`` in place and return it. A contiguous buffer of at least half the last-level
    cache is zeroed with streaming stores, which write past the cache instead of reading every
    line first (``torchclad._C_dispatch.zero_fill``, ``csrc/dispatch/zero_fill.h``: 3x faster for
    the fused 124M model's 0.5 GB gradient buffer); anything else, or without that extension,
    by ``t.zero_()``."""
    from .fastpath import extension

    ext = extension()
    if ext is None or not hasattr(ext, "zero_fill"):
        return t.zero_()
    ext.zero_fill(t)
    return t
