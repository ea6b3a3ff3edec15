"""The built-in kernels (``torchclad.kernels.KERNELS``, compiled AOT into ``torchclad._C``) as ops.

Each op is made by the same machinery as :func:`torchclad.function` (:mod:`torchclad.ops`), from
the kernel's signature and the bindings in ``torchclad._C``. Registered once, at the import of
:mod:`torchclad.nn`, under their kernel names: ``torch.ops.torchclad.gelu_forward``.

The ops take the kernels' arrays as tensors, already shaped the way the kernel reads them (the
modules flatten and check first, see :func:`check_input`). An optional array (``bias``) is an
empty tensor, which reaches the kernel as ``nullptr``. Besides the kernels there is one helper op,
``torchclad::checked_indices``: index validation that runs inside the graph (eager, opcheck,
torch.compile alike), so a kernel never indexes out of bounds.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Optional

import torch

from torchclad import kernels
from torchclad._kernel import Kernel
from torchclad.ops import KernelOp, make_op


@functools.lru_cache(maxsize=None)
def _extension():
    """The compiled built-in kernels: the best CPU-specific build this CPU runs
    (``torchclad._C_avx512`` / ``_C_avx2``, see :mod:`torchclad.build.isa`), else ``torchclad._C``.
    A CPU-specific module from another build than ``_C`` (left over) is never used."""
    import importlib

    from torchclad.build import isa

    try:
        from torchclad import _C
    except ImportError as e:
        raise ImportError(
            "torchclad._C (the built-in kernels, compiled at install time) is missing; "
            "install torchclad with `make install` (pip install --no-build-isolation -e .)"
        ) from e
    build = getattr(_C, "__torchclad_build__", None)
    for variant in isa.select(list(isa.VARIANTS)):
        if variant == "default":
            break
        try:
            mod = importlib.import_module(f"torchclad._C_{variant}")
        except ImportError:
            continue
        if build is not None and getattr(mod, "__torchclad_build__", None) == build:
            return mod
    return _C


@functools.lru_cache(maxsize=None)
def _signature(name: str) -> Any:
    """The Derivative-like signature of built-in kernel ``name``, as ``torchclad._C`` was built.

    ``_C.__torchclad_signatures__`` is used when the build records it; otherwise the engine
    re-derives it from the kernel source (the same deterministic run the install step made).
    """
    spec = next((s for s in kernels.KERNELS if s.name == name), None)
    if spec is None:
        raise KeyError(f"{name} is not a built-in kernel (see torchclad.kernels.KERNELS)")
    recorded = getattr(_extension(), "__torchclad_signatures__", None)
    if recorded is not None and name in recorded:
        return recorded[name]
    from torchclad import ad

    source = kernels.unit_source(spec)
    wrt = None if spec.wrt is None else list(spec.wrt)
    return ad.differentiate(source, name, wrt, filename=f"csrc/kernels/{spec.file}")


def builtin_op(name: str, *, inputs, outputs, sizes=None, value_sizes=()) -> KernelOp:
    """The op ``torchclad::<name>`` for built-in kernel ``name`` (every built-in kernel writes
    each element of its outputs: they are not zero-filled first).

    ``value_sizes``: the size functions that look at the values of the inputs (the index
    checks), run on every call; the others depend on the shapes only and are cached per call
    signature (``static_sizes`` of :func:`torchclad.ops.make_op`)."""
    sizes = dict(sizes or {})
    return make_op(Kernel(_signature(name), _extension()), name,
                   inputs=inputs, outputs=outputs, sizes=sizes, zero_outputs=False,
                   static_sizes=[n for n in sizes if n not in value_sizes])


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


def _index_range(op: str, name: str, idx, bound: int, *, allow_negative: bool = False) -> None:
    if idx.numel() == 0:
        return
    lo = -1 if allow_negative else 0
    bad = (idx < lo) | (idx >= bound)
    if bool(bad.any()):
        raise IndexError(f"torchclad::{op}: '{name}' holds {int(idx[bad].reshape(-1)[0])}, "
                         f"out of range [{lo}, {bound})")


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


def _crossentropy_n(logits, targets):
    _index_range("crossentropy_forward", "targets", targets, logits.shape[1],
                 allow_negative=True)
    return logits.shape[0]


# crossentropy: logits (N, C), targets (N) int64 (-1 = ignored) -> losses (N)
crossentropy_op = builtin_op(
    "crossentropy_forward", inputs=["logits", "targets"],
    outputs={"losses": _crossentropy_out},
    sizes={"N": _crossentropy_n, "C": lambda logits, targets: logits.shape[1]},
    value_sizes=("N",))
crossentropy = crossentropy_op.op  # the custom op; modules call crossentropy_op (its eager fast lane)


def _embedding_out(idx, weight):
    _dims("embedding_forward", "idx", idx, 1)
    _dims("embedding_forward", "weight", weight, 2)
    return (idx.shape[0], weight.shape[1])


def _embedding_n(idx, weight):
    _index_range("embedding_forward", "idx", idx, weight.shape[0])
    return idx.shape[0]


# embedding: idx (N) int64, weight (V, C) -> out (N, C)
embedding_op = builtin_op(
    "embedding_forward", inputs=["idx", "weight"],
    outputs={"out": _embedding_out},
    sizes={"N": _embedding_n, "C": lambda idx, weight: weight.shape[1]},
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


def _encoder_b(idx, wte, wpe):
    _index_range("encoder_forward", "idx", idx, wte.shape[0])
    return idx.shape[0]


# encoder (GPT-2 input layer): idx (B, T) int64, wte (V, C), wpe (maxT, C) -> out (B, T, C)
encoder_op = builtin_op(
    "encoder_forward", inputs=["idx", "wte", "wpe"],
    outputs={"out": _encoder_out},
    sizes={"B": _encoder_b, "Tn": lambda idx, wte, wpe: idx.shape[1],
           "C": lambda idx, wte, wpe: wte.shape[1]},
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
        name = "layernorm_forward" if eps == 1e-5 else (
            "layernorm_forward_eps_" + "".join(c if c.isalnum() else "_" for c in eps.hex()))
        op = make_op(
            Kernel(_signature("layernorm_forward"), _extension()), name,
            inputs=["inp", "weight", "bias"],
            outputs={"out": _layernorm_out, "mean": lambda inp, w, b: (_rows(inp, w, b),),
                     "rstd": lambda inp, w, b: (_rows(inp, w, b),)},
            sizes={"N": _rows, "C": lambda inp, w, b: inp.shape[-1],
                   "eps": lambda *a: eps}, zero_outputs=False, static_sizes=("N", "C", "eps"))
        _LAYERNORM_OPS[eps] = op
    return op


layernorm = layernorm_op(1e-5)


# ---- checks shared by the modules

_INT32_MAX = 2**31 - 1


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def check_input(owner: str, x: Any, *, name: str = "input", dtype: torch.dtype | None = None,
                min_dim: int = 0, max_dim: int | None = None, what: str = "") -> None:
    """A floating CPU tensor (of ``dtype`` if given) with ``min_dim``..``max_dim`` dims."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{owner}: {name} must be a torch.Tensor, got {type(x).__name__}")
    if x.device.type != "cpu":
        raise ValueError(f"{owner}: {name} is on {x.device}; torchclad kernels run on the CPU only "
                         "(move it with .cpu())")
    if dtype is not None and x.dtype != dtype:
        raise TypeError(f"{owner}: {name} must be a {dtype_name(dtype)} tensor (the dtype of the "
                        f"module's parameters), got {dtype_name(x.dtype)}; convert the input with "
                        f".to(torch.{dtype_name(dtype)}) or the module with .to(...)")
    if x.dtype not in (torch.float32, torch.float64):
        raise TypeError(f"{owner}: {name} must be a float32 or float64 tensor, got "
                        f"{dtype_name(x.dtype)}")
    if x.dim() < min_dim or (max_dim is not None and x.dim() > max_dim):
        want = (f"{min_dim}" if max_dim == min_dim else
                f"at least {min_dim}" if max_dim is None else f"{min_dim} to {max_dim}")
        unit = "dimension" if (max_dim if max_dim is not None else min_dim) == 1 else "dimensions"
        raise ValueError(f"{owner}: {name} must have {want} {unit}{what}, got shape "
                         f"{tuple(x.shape)} ({x.dim()}-d)")


def check_params_dtype(owner: str, *params: Any) -> torch.dtype:
    """The common floating dtype of a module's parameters (float32 or float64), on the CPU.

    ``params``: tensors, or ``(name, tensor)`` pairs (``named_parameters()``) so that the messages
    name the parameter; ``None`` entries (an absent bias) are skipped."""
    dtype = first = None
    for item in params:
        name, p = item if isinstance(item, tuple) else (None, item)
        if p is None:
            continue
        what = f"parameter '{name}' is" if name else "parameters are"
        if p.device.type != "cpu":
            raise ValueError(f"{owner}: {what} on {p.device}; torchclad kernels run on the CPU "
                             "only (move the module with .cpu())")
        if p.dtype not in (torch.float32, torch.float64):
            raise TypeError(f"{owner}: {what} {dtype_name(p.dtype)}; parameters must be float32 "
                            "or float64 (convert the module with .float() or .double())")
        if dtype is None:
            dtype, first = p.dtype, name
        elif p.dtype != dtype:
            names = f" ('{first}' and '{name}')" if first and name else ""
            raise TypeError(f"{owner}: parameters mix {dtype_name(dtype)} and "
                            f"{dtype_name(p.dtype)}{names}; convert the module with .to(dtype)")
    return dtype


_FLOATING = (torch.float32, torch.float64)


def params_dtype(owner: str, *named: tuple) -> torch.dtype | None:
    """:func:`check_params_dtype` for ``(name, tensor)`` pairs, with a cheap path for the usual
    case (every parameter present, on the CPU, of one floating dtype); anything else goes to the
    full check, which explains what is wrong."""
    dtype = None
    for _, p in named:
        if p is None or not p.is_cpu or (dtype is not None and p.dtype is not dtype):
            return check_params_dtype(owner, *named)
        dtype = p.dtype
    if dtype not in _FLOATING:
        return check_params_dtype(owner, *named)
    return dtype


def check_int32(owner: str, what: str, n: int) -> None:
    """The kernels index with 32-bit ints: refuse sizes they cannot address."""
    if isinstance(n, int) and n > _INT32_MAX:
        raise ValueError(f"{owner}: {what} is {n}, above the kernels' limit of 2**31 - 1 "
                         "elements; split the batch")


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


@torch.library.custom_op("torchclad::checked_indices", mutates_args=())
def checked_indices(index: torch.Tensor, bound: int, ignore_index: Optional[int],
                    owner: str) -> torch.Tensor:
    """``index`` as a contiguous int64 copy, every value checked to be in ``[0, bound)``.

    Values equal to ``ignore_index`` (when given) are allowed and come out as ``-1``. Raises
    ``IndexError`` naming the first offending value otherwise.
    """
    idx = index.to(torch.int64).contiguous().clone()
    bad = (idx < 0) | (idx >= bound)
    if ignore_index is not None:
        ignored = idx == ignore_index
        bad &= ~ignored
    if bool(bad.any()):
        v = int(idx[bad].reshape(-1)[0])
        msg = _INDEX_MESSAGES.get(owner, owner + ": index {v} is out of range [0, {n})")
        raise IndexError(msg.format(v=v, n=bound, ii=ignore_index))
    if ignore_index is not None:
        idx[ignored] = -1
    return idx


@checked_indices.register_fake
def _(index, bound, ignore_index, owner):
    return torch.empty(index.shape, dtype=torch.int64)
