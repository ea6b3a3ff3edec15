"""GPT-2 on the :mod:`torchclad.nn` modules, modular or fused.

- :mod:`.model` -- ``GPT2Config``, ``Block``, ``GPT2``, ``TokenIndexError``;
- :mod:`.tied` -- the modular model's tied wte / lm_head gradient, accumulated in place;
- :mod:`.fused` -- the fused model (one kernel, one generated sweep): ``param_layout``,
  ``arena_size``, ``fused_kernel_module``;
- :mod:`.sharing` -- whether a buffer handed out is still held elsewhere.
"""

from __future__ import annotations

from .fused import arena_size, fused_kernel_module, param_layout
from .model import GPT2, Block, GPT2Config, TokenIndexError

__all__ = ["GPT2Config", "Block", "GPT2", "TokenIndexError", "param_layout", "arena_size",
           "fused_kernel_module"]
