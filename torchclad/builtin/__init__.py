"""The built-in kernels.

- :mod:`.registry` -- the kernels of ``csrc/kernels/`` (read by ``setup.py``, no torch);
- :mod:`.loader` -- the prebuilt extension ``torchclad._C`` (or its best CPU-specific variant)
  and each kernel's signature as it was built;
- :mod:`.ops` -- the kernels as torch ops (``torch.ops.torchclad.*``), their shape checks, and
  the index-checking op ``torchclad::checked_indices``.
"""
