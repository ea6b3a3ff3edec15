"""The ops of the LLaMA-style built-in kernels: RMSNorm (``csrc/kernels/rmsnorm.cpp``), SiLU
and SwiGLU (``silu.cpp``), rotary embedding (``rope.cpp``).

Made like the others (:mod:`torchclad.builtin.ops`, :func:`torchclad.builtin.ops.builtin_op`):
registered once, at the import of this module (:mod:`torchclad.nn` imports it), as
``torch.ops.torchclad.<kernel>``; the first output's shape function checks the arrays' shapes,
so a direct call of an op never reads out of bounds.
"""

from __future__ import annotations

import math
from typing import Any

from torchclad.bridge.op import KernelOp, make_op, op_identifier
from torchclad.builtin import loader
from torchclad.builtin.ops import builtin_op

__all__ = ["silu_op", "swiglu_op", "rope_op", "rmsnorm_op", "rmsnorm_kernel_op"]


def _error(op: str, msg: str) -> ValueError:
    return ValueError(f"torchclad::{op}: {msg}")


def _numel(x):
    return x.numel()


def _same_shape(x):
    return x.shape


# B = batch, T = time, C = channels; elementwise: N = B * T * C
silu_op = builtin_op("silu_forward", inputs=["inp"], outputs={"out": _same_shape},
                     sizes={"N": _numel})


def _swiglu_out(inp):
    if inp.dim() < 1 or inp.shape[-1] % 2:
        raise _error("swiglu_forward", f"'inp' must have an even last dimension (..., 2H), got "
                                       f"shape {tuple(inp.shape)}")
    return (*inp.shape[:-1], inp.shape[-1] // 2)


# swiglu: inp (..., 2H) -- rows of [gate | value] -- -> out (..., H)
swiglu_op = builtin_op("swiglu_forward", inputs=["inp"], outputs={"out": _swiglu_out},
                       sizes={"N": lambda inp: math.prod(inp.shape[:-1]),
                              "H": lambda inp: inp.shape[-1] // 2})


def _rope_out(inp, cos, sin):
    op = "rope_forward"
    if inp.dim() != 4 or inp.shape[-1] % 2:
        raise _error(op, f"'inp' must have shape (B, T, NH, HS) with an even HS, got "
                         f"{tuple(inp.shape)}")
    T, half = inp.shape[1], inp.shape[3] // 2
    for name, t in (("freqs_cos", cos), ("freqs_sin", sin)):
        if t.dim() != 2 or t.shape[1] != half or t.shape[0] < T:
            raise _error(op, f"'{name}' must have shape (T', {half}) with T' >= T = {T}, got "
                             f"{tuple(t.shape)}")
    return inp.shape


# rope: inp (B, T, NH, HS), freqs_cos / freqs_sin (T' >= T, HS / 2) -> out (B, T, NH, HS)
rope_op = builtin_op("rope_forward", inputs=["inp", "freqs_cos", "freqs_sin"],
                     outputs={"out": _rope_out},
                     sizes={"B": lambda x, c, s: x.shape[0], "Tn": lambda x, c, s: x.shape[1],
                            "NH": lambda x, c, s: x.shape[2], "HS": lambda x, c, s: x.shape[3]})


# rmsnorm: inp (..., C) -- N = the product of the leading dimensions --, weight (C) or empty
# -> out (inp's shape), rstd (N). eps is a scalar parameter of the kernel: one op per eps
# (rmsnorm_forward_eps_<hex>), made by the module's constructor, as for layernorm.
_RMSNORM_OPS: dict[float, Any] = {}


def _rmsnorm_out(inp, weight):
    op = "rmsnorm_forward"
    if inp.dim() < 1:
        raise _error(op, f"'inp' must have at least 1 dimension (..., C), got shape "
                         f"{tuple(inp.shape)}")
    if tuple(weight.shape) not in ((inp.shape[-1],), (0,)):
        raise _error(op, f"'weight' must have shape ({inp.shape[-1]},) or (0,) (absent), got "
                         f"{tuple(weight.shape)}")
    return inp.shape


def _rows(inp, w):
    return math.prod(inp.shape[:-1])


def rmsnorm_kernel_op(eps: float) -> KernelOp:
    """The :class:`KernelOp` of the RMSNorm op for ``eps`` (call it: the eager fast lane)."""
    eps = float(eps)
    op = _RMSNORM_OPS.get(eps)
    if op is None:
        op = make_op(
            loader.kernel("rmsnorm_forward"), op_identifier("rmsnorm_forward_eps_" + eps.hex()),
            inputs=["inp", "weight"],
            outputs={"out": _rmsnorm_out, "rstd": lambda inp, w: (_rows(inp, w),)},
            sizes={"N": _rows, "C": lambda inp, w: inp.shape[-1], "eps": lambda *a: eps},
            zero_outputs=False, static_sizes=("N", "C", "eps"))
        _RMSNORM_OPS[eps] = op
    return op


def rmsnorm_op(eps: float):
    """The RMSNorm op for ``eps`` (the custom op)."""
    return rmsnorm_kernel_op(eps).op
