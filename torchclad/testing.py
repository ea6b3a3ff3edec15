"""Parity helpers: a torchclad module against its torch.nn twin."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import tree_flatten

__all__ = ["assert_parity"]


def _prepare(inputs: tuple) -> list:
    """Fresh leaves: floating tensors require grad, so input gradients can be compared too."""
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            x = x.detach().clone()
            if x.is_floating_point():
                x.requires_grad_(True)
        out.append(x)
    return out


def _close(a: torch.Tensor, b: torch.Tensor, what: str, rtol: float, atol: float) -> float:
    if a.shape != b.shape:
        raise AssertionError(f"assert_parity: {what}: shape {tuple(a.shape)} != {tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise AssertionError(f"assert_parity: {what}: dtype {a.dtype} != {b.dtype}")
    torch.testing.assert_close(
        a, b, rtol=rtol, atol=atol, equal_nan=True,
        msg=lambda m: f"assert_parity: {what} differs (module_a vs module_b, rtol={rtol}, atol={atol})\n{m}",
    )
    if a.numel() == 0 or not a.is_floating_point():
        return 0.0
    return (a.double() - b.double()).abs().nan_to_num(0.0).max().item()


def assert_parity(module_a: torch.nn.Module, module_b: torch.nn.Module, *inputs: Any,
                  rtol: float = 1e-4, atol: float = 1e-5) -> dict[str, float]:
    """Check that ``module_b`` computes what ``module_a`` does, values and gradients.

    Copies ``module_a``'s state_dict into ``module_b`` (either may be ``torch.compile``'d), runs both on copies of ``inputs``,
    compares every output, then backpropagates the same random weighting of the floating
    outputs through both and compares the gradients of every parameter (by name) and of every
    floating input. Raises ``AssertionError`` naming the first mismatch; returns the maximum
    absolute error per compared quantity.
    """
    # A torch.compile'd module runs compiled; its state and parameters are the original's.
    state_a, state_b = (getattr(m, "_orig_mod", m) for m in (module_a, module_b))
    state_b.load_state_dict(state_a.state_dict())
    ins_a, ins_b = _prepare(inputs), _prepare(inputs)
    out_a, spec_a = tree_flatten(module_a(*ins_a))
    out_b, spec_b = tree_flatten(module_b(*ins_b))
    if spec_a != spec_b:
        raise AssertionError(f"assert_parity: outputs have different structure:\n{spec_a}\nvs\n{spec_b}")

    errors: dict[str, float] = {}
    loss_a = loss_b = None
    gen = torch.Generator().manual_seed(0)
    for i, (a, b) in enumerate(zip(out_a, out_b)):
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            if a != b:
                raise AssertionError(f"assert_parity: output[{i}]: {a!r} != {b!r}")
            continue
        errors[f"output[{i}]"] = _close(a.detach(), b.detach(), f"output[{i}]", rtol, atol)
        if a.is_floating_point() and a.requires_grad and b.requires_grad:
            w = torch.randn(a.shape, generator=gen, dtype=a.dtype)
            term_a, term_b = (a * w).sum(), (b * w.to(b.dtype)).sum()
            loss_a = term_a if loss_a is None else loss_a + term_a
            loss_b = term_b if loss_b is None else loss_b + term_b
    if (loss_a is None) != (loss_b is None):
        raise AssertionError("assert_parity: only one module's outputs require grad")
    if loss_a is None:
        return errors
    loss_a.backward()
    loss_b.backward()

    params_b = dict(state_b.named_parameters())
    for name, pa in state_a.named_parameters():
        pb = params_b.get(name)
        if pb is None:
            raise AssertionError(f"assert_parity: parameter {name!r} of module_a is missing in module_b")
        what = f"grad of parameter {name!r}"
        if (pa.grad is None) != (pb.grad is None):
            which = "module_a" if pa.grad is None else "module_b"
            raise AssertionError(f"assert_parity: {what}: None in {which} only")
        if pa.grad is not None:
            errors[what] = _close(pa.grad, pb.grad, what, rtol, atol)
    for i, (xa, xb) in enumerate(zip(ins_a, ins_b)):
        if isinstance(xa, torch.Tensor) and xa.requires_grad:
            what = f"grad of input {i}"
            if (xa.grad is None) != (xb.grad is None):
                which = "module_a" if xa.grad is None else "module_b"
                raise AssertionError(f"assert_parity: {what}: None in {which} only")
            if xa.grad is not None:
                errors[what] = _close(xa.grad, xb.grad, what, rtol, atol)
    return errors
