"""Shared bits of the torchclad.nn module tests (tests/test_nn_*.py)."""

from __future__ import annotations

import torch

RTOL, ATOL = 1e-4, 1e-5  # float32 parity against torch.nn

# Leading dimensions 0 to 3, zero-size batches included.
LEADING = [(), (3,), (2, 3), (2, 1, 3), (0,), (2, 0), (0, 2, 3)]


def gradcheck_module(module: torch.nn.Module, *inputs, **kw) -> bool:
    """float64 gradcheck of ``module`` w.r.t. its parameters and its floating inputs."""
    module = module.double()
    names = [n for n, _ in module.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_(True) for _, p in module.named_parameters())
    ins = tuple(x.detach().clone().double().requires_grad_(True)
                if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs)

    def f(*args):
        state = dict(zip(names, args[:len(params)]))
        return torch.func.functional_call(module, state, args[len(params):])

    return torch.autograd.gradcheck(f, params + ins, **kw)
