"""The built-in kernels (``torchclad.builtin.registry.KERNELS``, compiled AOT into
``torchclad._C``) as ops, with their shape functions.

Each op is made by the same machinery as :func:`torchclad.function` (:mod:`torchclad.bridge.op`),
from the kernel's signature and the bindings of the extension (:mod:`torchclad.builtin.loader`).
Registered once, at the import of this module (:mod:`torchclad.nn` imports it), under their
kernel names: ``torch.ops.torchclad.gelu_forward``.

The ops take the kernels' arrays as tensors, already shaped the way the kernel reads them (the
modules flatten and check first, see :mod:`torchclad.nn.checks`). An optional array (``bias``)
is an empty tensor (:func:`none_tensor`), which reaches the kernel as ``nullptr``. Besides the
kernels there is one helper op, ``torchclad::checked_indices``: index validation that stays in
the graph (opcheck, torch.compile, dispatch modes), so a kernel never indexes out of bounds; plain
eager calls run its body directly (:func:`checked`).
"""

from __future__ import annotations

import math
from typing import Any, Optional

import torch

from torchclad.bridge.autograd import plain_call
from torchclad.bridge.op import KernelOp, make_op, op_identifier
from torchclad.builtin import loader, registry


def higher_order(name: str):
    """``() -> Derivative`` of built-in kernel ``name`` in forward mode and forward over reverse,
    from its source (the jvp and the double backward of :mod:`torchclad.bridge.higher`, compiled
    on first use; the install step builds first order only)."""

    def derive():
        from torchclad import engine
        from torchclad.toolchain.compiler import external_library

        spec = next(s for s in registry.KERNELS if s.name == name)
        wrt = None if spec.wrt is None else list(spec.wrt)
        d = engine.differentiate(registry.unit_source(spec), name, wrt,
                                 filename=f"csrc/kernels/{spec.file}", modes=("forward", "second"))
        ldflags = []
        for lib in spec.libraries:
            where, lname = external_library(lib)
            ldflags += [f"-L{where}", f"-l{lname}", f"-Wl,-rpath,{where}"]
        return d, tuple(ldflags)

    return derive


def builtin_op(name: str, *, inputs, outputs, sizes=None, value_sizes=()) -> KernelOp:
    """The op ``torchclad::<name>`` for built-in kernel ``name`` (every built-in kernel writes
    each element of its outputs: they are not zero-filled first).

    ``value_sizes``: the size functions that look at the values of the inputs (the index
    checks), run on every call; the others depend on the shapes only and are cached per call
    signature (``static_sizes`` of :func:`torchclad.bridge.op.make_op`)."""
    sizes = dict(sizes or {})
    return make_op(loader.kernel(name), name,
                   inputs=inputs, outputs=outputs, sizes=sizes, zero_outputs=False,
                   static_sizes=[n for n in sizes if n not in value_sizes],
                   higher_order=higher_order(name))


def _numel(x):
    return x.numel()


def _same_shape(x):
    return x.shape


# B = batch, T = time, C = channels; elementwise kernels see N = B * T * C.
gelu_op = builtin_op("gelu_forward", inputs=["inp"], outputs={"out": _same_shape},
                     sizes={"N": _numel})
gelu = gelu_op.op  # the custom op; modules call gelu_op (its eager fast lane)
gelu_erf_op = builtin_op("gelu_erf_forward", inputs=["inp"], outputs={"out": _same_shape},
                         sizes={"N": _numel})
gelu_erf = gelu_erf_op.op  # the custom op; modules call gelu_erf_op (its eager fast lane)

# Called directly, torch.ops.torchclad.* must not read out of bounds either: the shape function of
# each op's first output (run on every call, fake tensors included, before the kernel) checks the
# arrays' shapes, and for the index arrays a size function (run on real calls only) checks the
# values: ValueError / IndexError naming the argument.


def _shape_error(op: str, msg: str) -> ValueError:
    return ValueError(f"torchclad::{op}: {msg}")


def _dims(op: str, name: str, t, n: int) -> None:
    if t.dim() != n:
        raise _shape_error(op, f"'{name}' must have {n} dimensions, got shape {tuple(t.shape)}")


def _optional(op: str, name: str, t, n) -> None:
    """An optional (C) array: shape (n,), or empty for nullptr."""
    if tuple(t.shape) not in ((n,), (0,)):
        raise _shape_error(op, f"'{name}' must have shape ({n},) or (0,) (absent), got "
                               f"{tuple(t.shape)}")


def first_out_of_range(idx: torch.Tensor, lo: int, hi: int,
                       allowed: Optional[int] = None) -> Optional[int]:
    """The first value of ``idx`` (in memory order) outside ``[lo, hi)`` and not equal to
    ``allowed``, or None when there is none."""
    if idx.numel() == 0:
        return None
    return _first_outside(idx, lo, hi, allowed, _extremes(idx))


def _first_outside(idx: torch.Tensor, lo: int, hi: int, allowed: Optional[int],
                   extremes: tuple) -> Optional[int]:
    """:func:`first_out_of_range` of a non-empty ``idx`` whose (min, max) is ``extremes``."""
    mn, mx = extremes
    if mn >= lo and mx < hi:
        return None  # the common case, in one pass
    bad = (idx < lo) | (idx >= hi)
    if allowed is not None:
        bad &= idx != allowed
    if not bool(bad.any()):
        return None
    return int(idx[bad].reshape(-1)[0])


def _extremes(idx: torch.Tensor) -> tuple:
    """(min, max) of a non-empty integer tensor, in one pass."""
    mn, mx = torch.aminmax(idx)
    return int(mn), int(mx)


def _index_count(op: str, name: str, pos: int, bound, *, allow_negative: bool = False):
    """A size function: the length of the index array ``name`` (argument ``pos``), its values
    checked to be in ``[0, bound(*inputs))`` (or -1, with ``allow_negative``)."""
    lo = -1 if allow_negative else 0

    def count(*ins):
        idx = ins[pos]
        hi = bound(*ins)
        v = first_out_of_range(idx, lo, hi)
        if v is not None:
            raise IndexError(f"torchclad::{op}: '{name}' holds {v}, out of range [{lo}, {hi})")
        return idx.shape[0]
    return count


def _residual_out(a, b):
    if a.shape != b.shape:
        raise _shape_error("residual_forward", f"'inp1' has shape {tuple(a.shape)} but 'inp2' "
                                               f"has {tuple(b.shape)}; they must match")
    return a.shape


residual_op = builtin_op("residual_forward", inputs=["inp1", "inp2"],
                         outputs={"out": _residual_out}, sizes={"N": lambda a, b: a.numel()})
residual = residual_op.op  # the custom op; modules call residual_op (its eager fast lane)


def _matmul_out(inp, weight, bias):
    op = "matmul_forward"
    _dims(op, "inp", inp, 2)
    _dims(op, "weight", weight, 2)
    if weight.shape[1] != inp.shape[1]:
        raise _shape_error(op, f"'weight' has shape {tuple(weight.shape)}, expected "
                               f"(OC, {inp.shape[1]}) for 'inp' of shape {tuple(inp.shape)}")
    _optional(op, "bias", bias, weight.shape[0])
    return (inp.shape[0], weight.shape[0])


# matmul: inp (BT, C), weight (OC, C), bias (OC) or empty (no bias) -> out (BT, OC)
matmul_op = builtin_op(
    "matmul_forward", inputs=["inp", "weight", "bias"],
    outputs={"out": _matmul_out},
    sizes={"BT": lambda inp, weight, bias: inp.shape[0],
           "C": lambda inp, weight, bias: inp.shape[1],
           "OC": lambda inp, weight, bias: weight.shape[0]})
matmul = matmul_op.op  # the custom op; modules call matmul_op (its eager fast lane)


def _softmax_out(x):
    _dims("softmax_forward", "inp", x, 2)
    return x.shape


# softmax over the last dim: inp (N, C) -> out (N, C)
softmax_op = builtin_op("softmax_forward", inputs=["inp"], outputs={"out": _softmax_out},
                        sizes={"N": lambda x: x.shape[0], "C": lambda x: x.shape[1]})
softmax = softmax_op.op  # the custom op; modules call softmax_op (its eager fast lane)


def _crossentropy_out(logits, targets):
    op = "crossentropy_forward"
    _dims(op, "logits", logits, 2)
    if tuple(targets.shape) != (logits.shape[0],):
        raise _shape_error(op, f"'targets' must have shape ({logits.shape[0]},), got "
                               f"{tuple(targets.shape)}")
    return (logits.shape[0],)


# crossentropy: logits (N, C), targets (N) int64 (-1 = ignored) -> losses (N)
crossentropy_op = builtin_op(
    "crossentropy_forward", inputs=["logits", "targets"],
    outputs={"losses": _crossentropy_out},
    sizes={"N": _index_count("crossentropy_forward", "targets", 1,
                             lambda logits, targets: logits.shape[1], allow_negative=True),
           "C": lambda logits, targets: logits.shape[1]},
    value_sizes=("N",))
crossentropy = crossentropy_op.op  # the custom op; modules call crossentropy_op (its eager fast lane)


def _embedding_out(idx, weight):
    _dims("embedding_forward", "idx", idx, 1)
    _dims("embedding_forward", "weight", weight, 2)
    return (idx.shape[0], weight.shape[1])


# embedding: idx (N) int64, weight (V, C) -> out (N, C)
embedding_op = builtin_op(
    "embedding_forward", inputs=["idx", "weight"],
    outputs={"out": _embedding_out},
    sizes={"N": _index_count("embedding_forward", "idx", 0, lambda idx, weight: weight.shape[0]),
           "C": lambda idx, weight: weight.shape[1], "V": lambda idx, weight: weight.shape[0]},
    value_sizes=("N",))
embedding = embedding_op.op  # the custom op; modules call embedding_op (its eager fast lane)


def _encoder_out(idx, wte, wpe):
    op = "encoder_forward"
    _dims(op, "idx", idx, 2)
    _dims(op, "wte", wte, 2)
    _dims(op, "wpe", wpe, 2)
    if wpe.shape[1] != wte.shape[1] or idx.shape[1] > wpe.shape[0]:
        raise _shape_error(op, f"'wpe' has shape {tuple(wpe.shape)}, expected (maxT, "
                               f"{wte.shape[1]}) with maxT >= T = {idx.shape[1]}")
    return (idx.shape[0], idx.shape[1], wte.shape[1])


# encoder (GPT-2 input layer): idx (B, T) int64, wte (V, C), wpe (maxT, C) -> out (B, T, C)
encoder_op = builtin_op(
    "encoder_forward", inputs=["idx", "wte", "wpe"],
    outputs={"out": _encoder_out},
    sizes={"B": _index_count("encoder_forward", "idx", 0, lambda idx, wte, wpe: wte.shape[0]),
           "Tn": lambda idx, wte, wpe: idx.shape[1],
           "C": lambda idx, wte, wpe: wte.shape[1], "V": lambda idx, wte, wpe: wte.shape[0]},
    value_sizes=("B",))
encoder = encoder_op.op  # the custom op; modules call encoder_op (its eager fast lane)


# attention: qkv viewed as (B, T, 3, NH, hs) -- the number of heads travels in the shape, so one
# op serves every head count -> out (B, T, C), preatt (B, NH, T, T), att (B, NH, T, T)
def _att_shape(qkv):
    return (qkv.shape[0], qkv.shape[3], qkv.shape[1], qkv.shape[1])


def _attention_out(qkv):
    _dims("attention_forward", "inp", qkv, 5)
    if qkv.shape[2] != 3 or qkv.shape[3] == 0:
        raise _shape_error("attention_forward", "'inp' must have shape (B, T, 3, NH, hs) with "
                                                f"NH > 0, got {tuple(qkv.shape)}")
    return (qkv.shape[0], qkv.shape[1], qkv.shape[3] * qkv.shape[4])


attention_op = builtin_op(
    "attention_forward", inputs=["inp"],
    outputs={"out": _attention_out, "preatt": _att_shape, "att": _att_shape},
    sizes={"B": lambda qkv: qkv.shape[0], "Tn": lambda qkv: qkv.shape[1],
           "C": lambda qkv: qkv.shape[3] * qkv.shape[4], "NH": lambda qkv: qkv.shape[3]})
attention = attention_op.op  # the custom op; modules call attention_op (its eager fast lane)


# layernorm: inp (..., C) -- N = the product of the leading dimensions, rows of C values --,
# weight (C) or empty, bias (C) or empty -> out (inp's shape), mean (N), rstd (N). The leading
# dimensions are the kernel's rows as they are (the kernel reads the contiguous rows), so a module
# need not reshape its input: no view nodes around the op in the autograd graph.
# eps is a scalar parameter of the kernel, so each eps gets its own op: layernorm_forward for
# the default 1e-5, layernorm_forward_eps_<hex> otherwise (made on first use, by the module's
# constructor, so that torch.compile only ever looks them up).
_LAYERNORM_OPS: dict[float, Any] = {}


def _layernorm_out(inp, weight, bias):
    op = "layernorm_forward"
    if inp.dim() < 1:
        raise _shape_error(op, f"'inp' must have at least 1 dimension (..., C), got shape "
                               f"{tuple(inp.shape)}")
    _optional(op, "weight", weight, inp.shape[-1])
    _optional(op, "bias", bias, inp.shape[-1])
    return inp.shape


def _rows(inp, w, b):
    return math.prod(inp.shape[:-1])


def layernorm_op(eps: float):
    """The layernorm op for ``eps`` (the custom op)."""
    return layernorm_kernel_op(eps).op


def layernorm_kernel_op(eps: float) -> KernelOp:
    """The :class:`KernelOp` of the layernorm op for ``eps`` (call it: the eager fast lane)."""
    op = _LAYERNORM_OPS.get(eps)
    if op is None:
        eps = float(eps)
        name = ("layernorm_forward" if eps == 1e-5
                else op_identifier("layernorm_forward_eps_" + eps.hex()))
        op = make_op(
            loader.kernel("layernorm_forward"), name,
            inputs=["inp", "weight", "bias"],
            outputs={"out": _layernorm_out, "mean": lambda inp, w, b: (_rows(inp, w, b),),
                     "rstd": lambda inp, w, b: (_rows(inp, w, b),)},
            sizes={"N": _rows, "C": lambda inp, w, b: inp.shape[-1],
                   "eps": lambda *a: eps}, zero_outputs=False, static_sizes=("N", "C", "eps"),
            higher_order=higher_order("layernorm_forward"))
        _LAYERNORM_OPS[eps] = op
    return op


layernorm = layernorm_op(1e-5)


def none_tensor(like: torch.Tensor) -> torch.Tensor:
    """The empty tensor that stands for ``nullptr`` (an absent weight or bias)."""
    return like.new_empty((0,))


# ---- index validation as an op (so that torch.compile keeps it in the graph)

_INDEX_MESSAGES = {
    "Embedding": "Embedding: index {v} is out of range for num_embeddings={n} "
                 "(expected 0 <= index < {n})",
    "CrossEntropyLoss": "CrossEntropyLoss: target {v} is out of range for {n} classes "
                        "(expected 0 <= target < {n}, or ignore_index={ii})",
}


def checked(index: torch.Tensor, bound: int, ignore_index: Optional[int],
            owner: str) -> torch.Tensor:
    """:func:`checked_indices`, run as plain Python for a plain eager call (the custom op's
    dispatch alone cost 30-80 us a call, twice per modular GPT-2 step); the op itself wherever
    a graph is recorded -- torch.compile, a dispatch mode, a functorch transform, tracing -- so
    that the check stays in the graph."""
    if not torch.compiler.is_compiling() and plain_call((index,)):
        return _checked_indices(index, bound, ignore_index, owner)
    return checked_indices(index, bound, ignore_index, owner)


@torch.library.custom_op("torchclad::checked_indices", mutates_args=())
def checked_indices(index: torch.Tensor, bound: int, ignore_index: Optional[int],
                    owner: str) -> torch.Tensor:
    """``index`` as a contiguous int64 copy, every value checked to be in ``[0, bound)``.

    Values equal to ``ignore_index`` (when given) are allowed and come out as ``-1``. Raises
    ``IndexError`` naming the first offending value otherwise.
    """
    return _checked_indices(index, bound, ignore_index, owner)


def _checked_indices(index: torch.Tensor, bound: int, ignore_index: Optional[int],
                     owner: str) -> torch.Tensor:
    idx = index.to(torch.int64).contiguous().clone()
    if idx.numel() == 0:
        return idx
    mn, mx = _extremes(idx)
    v = _first_outside(idx, 0, bound, ignore_index, (mn, mx))
    if v is not None:
        msg = _INDEX_MESSAGES.get(owner, owner + ": index {v} is out of range [0, {n})")
        raise IndexError(msg.format(v=v, n=bound, ii=ignore_index))
    if ignore_index is not None and mn <= ignore_index <= mx:  # (else no value is it)
        idx[idx == ignore_index] = -1
    return idx


@checked_indices.register_fake
def _(index, bound, ignore_index, owner):
    return torch.empty(index.shape, dtype=torch.int64)
