"""Embedding (built-in kernel ``embedding_forward`` in ``csrc/kernels/encoder.cpp``)."""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch.nn import Parameter

from ..builtin import ops as builtin_ops
from .checks import check_int32, check_params_dtype, dtype_name, factory_kwargs

_INDEX_DTYPES = (torch.int64, torch.int32)


class Embedding(torch.nn.Module):
    """A lookup table, like :class:`torch.nn.Embedding` (same arguments, init, state).

    ``weight`` is ``(num_embeddings, embedding_dim)``, initialised N(0, 1). Input: int64 (or
    int32) indices of any shape; output ``(*input.shape, embedding_dim)``. Every index is checked
    before the kernel runs (``IndexError`` naming the value), inside the graph, so compiled
    models check too. ``padding_idx``, ``max_norm``, ``scale_grad_by_freq`` and ``sparse``
    are not supported (use torch.nn.Embedding for those).
    """

    __constants__ = ["num_embeddings", "embedding_dim"]

    def __init__(self, num_embeddings: int, embedding_dim: int,
                 padding_idx: Optional[int] = None, max_norm: Optional[float] = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False,
                 _weight: Optional[torch.Tensor] = None, _freeze: bool = False, device=None,
                 dtype=None) -> None:
        super().__init__()
        f = factory_kwargs("Embedding", device, dtype)
        unsupported = {"padding_idx": (padding_idx, None), "max_norm": (max_norm, None),
                       "scale_grad_by_freq": (scale_grad_by_freq, False),
                       "sparse": (sparse, False)}
        for name, (v, default) in unsupported.items():
            if v != default:
                raise NotImplementedError(
                    f"torchclad.nn.Embedding: {name}={v!r} is not supported; use "
                    "torch.nn.Embedding for it")
        for what, v in (("num_embeddings", num_embeddings), ("embedding_dim", embedding_dim)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"Embedding: {what} must be a non-negative int, got {v!r}")
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = None
        self.max_norm = None
        self.norm_type = norm_type
        self.scale_grad_by_freq = False
        self.sparse = False
        if _weight is None:
            self.weight = Parameter(torch.empty((num_embeddings, embedding_dim), **f),
                                    requires_grad=not _freeze)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError(f"Embedding: _weight has shape {tuple(_weight.shape)}, expected "
                                 f"({num_embeddings}, {embedding_dim})")
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self) -> None:
        torch.nn.init.normal_(self.weight)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        check_params_dtype("Embedding", ("weight", self.weight))
        if not isinstance(input, torch.Tensor):
            raise TypeError(f"Embedding: input must be a tensor of int64 indices, got "
                            f"{type(input).__name__}")
        if input.dtype not in _INDEX_DTYPES:
            raise TypeError(f"Embedding: input must be a tensor of int64 (or int32) indices, got "
                            f"{dtype_name(input.dtype)}")
        if input.device.type != "cpu":
            raise ValueError(f"Embedding: input is on {input.device}; torchclad kernels run on "
                             "the CPU only (move it with .cpu())")
        n = math.prod(input.shape)
        check_int32("Embedding", "the number of output elements", n * self.embedding_dim)
        idx = builtin_ops.checked(input.reshape(n), self.num_embeddings, None, "Embedding")
        out = builtin_ops.embedding_op(idx, self.weight)
        return out.reshape(*input.shape, self.embedding_dim)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"
