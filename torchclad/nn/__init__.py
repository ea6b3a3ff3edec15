"""Drop-in modules whose gradients come from the engine (built-in kernels in ``torchclad._C``).

So far: :class:`GELU`. Importing this package registers the built-in kernels' custom ops
(``torch.ops.torchclad.*``) once.
"""

from __future__ import annotations

from .activation import GELU

__all__ = ["GELU"]
