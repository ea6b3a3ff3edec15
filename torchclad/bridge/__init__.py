"""The bridge: a compiled derivative becomes something torch calls.

- :mod:`.kernel` -- ``Kernel``: one compiled kernel's bindings, its dtypes and argument checks.
- :mod:`.op` -- ``torchclad.function``: ``KernelOp``, a ``torch.library`` custom op (schema,
  registration, fake) around a ``Kernel``, with split-mode forward and reverse sweep.
- :mod:`.autograd` -- the op's backward: the registered autograd formula and the eager fast lane.
- :mod:`.plan` -- per call signature checks and plans; the ``Record`` a forward leaves.
- :mod:`.scratch` -- the adjoint buffers of the reverse sweeps and their pool.
- :mod:`.gradient` -- ``torchclad.gradient``: call a generated pullback on numbers and tensors.
"""
