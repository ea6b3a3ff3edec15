"""Whether a tensor's memory is held by anything else: what lets GPT-2 reuse or write into a
buffer it handed out (the fused model's gradient and logits buffers, the tied embedding's
gradient)."""

from __future__ import annotations

import torch

try:
    _use_count = torch._C._storage_Use_Count
except AttributeError:  # not in this torch: no reuse of handed-out buffers
    _use_count = None

#: False on a torch without a storage use count: :func:`unshared` must not be called, and the
#: callers fall back to fresh buffers
AVAILABLE = _use_count is not None


def unshared(buf: torch.Tensor) -> bool:
    """Nothing but ``buf`` itself holds its memory: no view, alias or other tensor on it (the
    storage's reference count is ``buf``'s one plus the Python storage object's).

    torch has no public API for a storage's reference count (``sys.getrefcount`` sees Python
    references only, not the views and C++ holders that share the storage), so this reads the
    private ``torch._C._storage_Use_Count`` of ``UntypedStorage._cdata``, here only
    (:data:`AVAILABLE` says whether this torch has it)."""
    return _use_count(buf.untyped_storage()._cdata) <= 2
