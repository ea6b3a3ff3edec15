"""Cross-entropy loss (fused softmax + NLL kernel ``csrc/kernels/crossentropy.cpp``)."""

from __future__ import annotations

import math
from typing import Optional

import torch

from ..bridge.autograd import plain_call
from ..builtin import ops as builtin_ops
from .checks import INT32_MAX, check_input, check_int32, dtype_name, usual

_REDUCTIONS = ("mean", "sum", "none")


def _legacy_reduction(size_average, reduce) -> str:
    """The ``reduction`` torch.nn losses make of the deprecated ``size_average`` / ``reduce``
    arguments (with torch's deprecation warning).

    torch has no public function for it: this calls the one its own losses use,
    ``torch.nn._reduction.legacy_get_string``, here only."""
    from torch.nn import _reduction

    return _reduction.legacy_get_string(size_average, reduce)


class CrossEntropyLoss(torch.nn.Module):
    """Cross-entropy of class-index targets, like :class:`torch.nn.CrossEntropyLoss`.

    Input ``(C)``, ``(N, C)`` or ``(N, C, d1, ..., dk)`` (classes in dim 1); target ``()``,
    ``(N)`` or ``(N, d1, ..., dk)`` of int64 class indices. One fused kernel computes each
    row's ``logsumexp - logit[target]`` stably (logits of any size); ``reduction="mean"``
    averages over the targets that are not ``ignore_index`` (all ignored: nan, like torch),
    ``"sum"`` adds, ``"none"`` returns the per-element losses (0 where ignored). A target out of
    range raises ``IndexError`` naming it. Class weights, label smoothing and probability
    targets are not supported.
    """

    __constants__ = ["ignore_index", "reduction", "label_smoothing"]

    def __init__(self, weight: Optional[torch.Tensor] = None, size_average=None,
                 ignore_index: int = -100, reduce=None, reduction: str = "mean",
                 label_smoothing: float = 0.0) -> None:
        super().__init__()
        if size_average is not None or reduce is not None:
            reduction = _legacy_reduction(size_average, reduce)
        if weight is not None:
            raise NotImplementedError("torchclad.nn.CrossEntropyLoss: class weights (weight=...) "
                                      "are not supported; use torch.nn.CrossEntropyLoss")
        if label_smoothing != 0.0:
            raise NotImplementedError("torchclad.nn.CrossEntropyLoss: label_smoothing is not "
                                      "supported; use torch.nn.CrossEntropyLoss")
        if reduction not in _REDUCTIONS:
            raise ValueError(f"CrossEntropyLoss: reduction must be one of {_REDUCTIONS}, got "
                             f"{reduction!r}")
        if not isinstance(ignore_index, int) or isinstance(ignore_index, bool):
            raise TypeError(f"CrossEntropyLoss: ignore_index must be an int, got {ignore_index!r}")
        self.register_buffer("weight", None)
        self.ignore_index = ignore_index
        self.reduction = reduction
        self.label_smoothing = 0.0

    def forward(self, input: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        # The usual call -- (N, C) logits, (N) int64 targets, every one a class and none
        # ignore_index -- checked in a few reads and one pass over the targets; anything else
        # takes the full path below, which explains what is wrong. The pass reads values: not
        # under a transform or a dispatch mode (plain_call), where the check is an op.
        if (usual(input) and input.dim() == 2 and type(target) is torch.Tensor
                and target.dtype is torch.int64 and target.is_cpu and target.dim() == 1
                and plain_call((input, target))):
            N, C = input.shape
            if (N > 0 and target.shape[0] == N and not 0 <= self.ignore_index < C
                    and N * C <= INT32_MAX
                    and builtin_ops.first_out_of_range(target, 0, C) is None):
                return self._reduce(builtin_ops.crossentropy_op(input, target.contiguous()),
                                    (N,), N)
        return self._forward_checked(input, target)

    def _forward_checked(self, input: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        check_input("CrossEntropyLoss", input, min_dim=1)
        if not isinstance(target, torch.Tensor):
            raise TypeError(f"CrossEntropyLoss: target must be a tensor of int64 class indices, "
                            f"got {type(target).__name__}")
        if target.is_floating_point():
            raise NotImplementedError(
                "torchclad.nn.CrossEntropyLoss: class-probability (floating) targets are not "
                f"supported, got a {dtype_name(target.dtype)} target; pass int64 class indices")
        if target.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"CrossEntropyLoss: target must be a tensor of int64 class indices, "
                            f"got {dtype_name(target.dtype)}")
        if target.device.type != "cpu":
            raise ValueError(f"CrossEntropyLoss: target is on {target.device}; torchclad kernels "
                             "run on the CPU only")
        if input.dim() == 1:
            C = input.shape[0]
            want = ()
            logits = input.reshape(1, C)
        else:
            C = input.shape[1]
            want = (input.shape[0], *input.shape[2:])
            logits = input.movedim(1, -1).reshape(-1, C) if input.dim() > 2 else input
        if tuple(target.shape) != tuple(want):
            raise ValueError(f"CrossEntropyLoss: target has shape {tuple(target.shape)}, expected "
                             f"{tuple(want)} for input of shape {tuple(input.shape)} (classes in "
                             "dim 1, or dim 0 of a 1-d input)")
        if C == 0:
            raise ValueError(f"CrossEntropyLoss: input of shape {tuple(input.shape)} has 0 classes")
        rows = math.prod(want)
        check_int32("CrossEntropyLoss", "the number of logits", rows * C)
        targets = builtin_ops.checked(target.reshape(rows), C, self.ignore_index,
                                   "CrossEntropyLoss")
        losses = builtin_ops.crossentropy_op(logits, targets)
        return self._reduce(losses, want, None if self.reduction != "mean" else
                            (targets >= 0).sum().to(losses.dtype))

    def _reduce(self, losses: torch.Tensor, shape: tuple, count) -> torch.Tensor:
        """The reduction of the per-row ``losses``: ``shape`` for "none", the sum, or the sum
        over ``count`` (the targets not ignored: an int, or a tensor of the losses' dtype)."""
        if self.reduction == "none":
            return losses.reshape(shape)
        total = losses.sum()
        if self.reduction == "sum":
            return total
        return total / count

    def extra_repr(self) -> str:
        return f"ignore_index={self.ignore_index}, reduction={self.reduction!r}"
