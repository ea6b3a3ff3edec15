"""Debug builds: arrays between guard pages, and faults explained by the array they hit.

``torchclad.function(..., debug=True)`` compiles the kernel with ``TORCHCLAD_GUARDED``
(``csrc/runtime/torchclad/capi.h``: a memory fault or sanitizer trap in the call returns to
the entry point instead of killing the process) and runs it on buffers made here: each array
ends exactly where an inaccessible region of :data:`GUARD` bytes begins, and another such region
lies before the page it starts in. Reading or writing up to :data:`GUARD` bytes past the end
faults at once; an access before the start faults once it leaves the array's first page.
:func:`explain` turns the fault into :class:`MemoryFault`, naming the array, how far out the
access was, and the source line (from the debug information, when the fault is in the user's
code).

The guard pages cost address space, not memory; every buffer of a debug call (inputs are
copied in) is made this way, so a debug op is for finding bugs, not for speed.
"""

from __future__ import annotations

import ctypes
import math
import mmap
import threading
from typing import Mapping

import torch

from torchclad.bridge.memory import Memory
from torchclad.toolchain.clib import KernelFault

__all__ = ["GuardedMemory", "GUARDED", "MemoryFault", "explain", "GUARD"]

PAGE = mmap.PAGESIZE
GUARD = 16 * PAGE
_PROT_NONE = 0
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_lock = threading.Lock()
#: data address -> (first guarded byte before it, first guarded byte after it) of live buffers
_regions: dict[int, tuple[int, int]] = {}


class MemoryFault(RuntimeError):
    """A debug build of a kernel accessed memory it must not (or hit a sanitizer trap)."""


def _guarded(shape, dtype: torch.dtype) -> torch.Tensor:
    n = math.prod(shape)
    nbytes = n * dtype.itemsize
    if nbytes == 0:
        return torch.empty(shape, dtype=dtype)  # data_ptr 0: any access is a null access
    body = -(-nbytes // PAGE) * PAGE
    mm = mmap.mmap(-1, GUARD + body + GUARD)
    anchor = ctypes.c_char.from_buffer(mm)
    base = ctypes.addressof(anchor)
    del anchor  # the mapping's address stays; only the export is released
    for start in (base, base + GUARD + body):
        if _libc.mprotect(start, GUARD, _PROT_NONE) != 0:
            raise OSError(ctypes.get_errno(), "torchclad: mprotect of a guard page failed")
    offset = GUARD + body - nbytes
    t = torch.frombuffer(mm, dtype=dtype, count=n, offset=offset).view(shape)
    with _lock:
        _regions[base + offset] = (base + GUARD, base + GUARD + body)
    _finalize(t, base + offset)
    return t


def _finalize(t: torch.Tensor, addr: int) -> None:
    import weakref

    def drop():
        with _lock:
            _regions.pop(addr, None)
    weakref.finalize(t.untyped_storage(), drop)


class GuardedMemory(Memory):
    """Every buffer between guard pages; inputs are always copied in."""

    guarded = True

    def copy(self, t: torch.Tensor) -> torch.Tensor:
        out = _guarded(tuple(t.shape), t.dtype)
        out.copy_(t)
        return out

    def readable(self, t: torch.Tensor) -> torch.Tensor:
        return self.copy(t)

    def empty(self, shape, dtype: torch.dtype) -> torch.Tensor:
        return _guarded(tuple(shape), dtype)

    def zeros(self, shape, dtype: torch.dtype) -> torch.Tensor:
        return _guarded(tuple(shape), dtype).zero_()


GUARDED = GuardedMemory()

_SIGNALS = {11: "segmentation fault", 7: "bus error", 4: "sanitizer trap (illegal instruction)",
            8: "arithmetic trap"}


def _where(fault: KernelFault, user_file: str) -> str:
    src = fault.source
    if not src:
        return ""
    path, _, line = src.rpartition(":")
    if path == user_file or path.endswith("/" + user_file):  # (relative to the build directory)
        return f" at {user_file}:{line}"
    if "torchclad-" in path:
        return " in the code torchclad generated (the derivative)"
    return f" at {src}"


def _hit(fault: KernelFault, arrays: Mapping[str, torch.Tensor]) -> str | None:
    a = fault.address
    for label, t in arrays.items():
        if t.numel() == 0 or not isinstance(t, torch.Tensor):
            continue
        start = t.data_ptr()
        with _lock:
            region = _regions.get(start)
        if region is None:
            continue
        lo, hi = region
        end = start + t.numel() * t.element_size()
        what = f"{label} ({t.numel()} {str(t.dtype).removeprefix('torch.')} elements)"
        if end <= a < hi + GUARD:
            return f"past the end of {what}: element {(a - start) // t.element_size()}"
        if lo - GUARD <= a < start:
            return (f"before the start of {what}: element "
                    f"-{-((a - start) // t.element_size())}")
    return None


def explain(fault: KernelFault, arrays: Mapping[str, torch.Tensor], *, op: str, user_file: str,
            stage: str) -> MemoryFault:
    """The :class:`MemoryFault` of ``fault`` in ``stage`` (a phrase: "the forward"), the call's
    arrays by label (``"'x'"``, ``"the gradient of 'x'"``)."""
    access = "write" if fault.write else "read"
    kind = _SIGNALS.get(fault.signal, f"signal {fault.signal}")
    where = _where(fault, user_file)
    if fault.signal in (11, 7):
        hit = _hit(fault, arrays)
        if hit is not None:
            return MemoryFault(f"{op}: out-of-bounds {access} {hit}, in {stage}{where}. Check "
                               "the sizes the kernel is given (sizes=, input_shapes=) against "
                               "the arrays' shapes.")
        if fault.address < PAGE:
            return MemoryFault(f"{op}: {access} through a null pointer in {stage}{where} (an "
                               "array with no elements?)")
        return MemoryFault(f"{op}: invalid {access} at address {fault.address:#x}, not next to "
                           f"any array of the call, in {stage}{where} (a wild pointer, or an "
                           f"index far out of range)")
    return MemoryFault(f"{op}: {kind} in {stage}{where}: the debug build traps on an "
                       "out-of-bounds index into a local array, signed integer overflow, a bad "
                       "shift, integer division by zero, or a missing return")
