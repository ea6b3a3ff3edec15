"""The modular GPT-2's tied embedding: wte's gradient accumulated in place.

wte is read twice, by the encoder (first layer) and by the lm_head (last). Left to autograd,
each backward makes a (V, C) gradient of its own (the lm_head matmul's d weight, the encoder's
scatter-add into zeros) and AccumulateGrad adds the two: two fresh 154 MB buffers and an add per
step for GPT-2 small. Instead, the lm_head reads wte through ``_HeadWeight``, whose backward
hands the lm_head's d weight over (instead of to autograd), and the encoder's generated sweep
accumulates into that very buffer: one buffer, no add. The backward runs the lm_head before the
encoder (it is later in the graph); should the encoder's backward come first anyway, or the
buffer not be ours to write, each returns its own gradient to autograd. The hand-over is for a
large wte (``_TiedGrad.min_elements``): for a small vocabulary the add costs less than its two
Python autograd Functions.

The encoder's forward is the recording one (its record kept for the backward, which then runs
no forward again), and its backward runs the generated sweep that only reads d out (the
engine's proof, ``Derivative.assign_extents``): the grad goes in as it comes, uncopied.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional

import torch

from torchclad.bridge.autograd import plain_call
from torchclad.bridge.higher import needs_functions
from torchclad.builtin import ops as builtin_ops

from . import sharing

__all__ = ["encode"]


def encode(model: Any, idx64: torch.Tensor) -> tuple[torch.Tensor, Callable]:
    """The encoder's output for the token ids ``idx64`` (B, T) and the lm_head to apply to the
    last hidden states: through the hand-over of wte's gradient when it applies, else the
    plain encoder op and ``model.lm_head``."""
    tr = model.transformer
    tie = _TiedGrad.for_call(model, idx64)
    if tie is None:
        return builtin_ops.encoder_op(idx64, tr.wte.weight, tr.wpe.weight), model.lm_head
    return _TiedEncoder.apply(idx64, tr.wte.weight, tr.wpe.weight, tie), tie.head


def _tie_supported() -> bool:
    op = builtin_ops.encoder_op
    return not op.has_ret and set(op.k.adjoints) == {"wte", "wpe", "out"}


def _has_forward_hooks(module: torch.nn.Module) -> bool:
    """Whether a forward (pre-)hook runs around ``module``'s forward, its own or a global one.

    torch has no public API that says so: this reads ``torch.nn.Module``'s private hook dicts
    and the global ones of ``torch.nn.modules.module``, here only."""
    from torch.nn.modules import module as nn_module

    return bool(module._forward_hooks or module._forward_pre_hooks
                or nn_module._global_forward_hooks or nn_module._global_forward_pre_hooks)


class _TiedGrad:
    """The hand-over between one forward's lm_head and encoder backwards."""

    __slots__ = ("lock", "grad", "encoder_done", "head")
    enabled = True  # False: the two gradients go to autograd separately (the tests compare)
    # The hand-over saves a (V, C) buffer and an add per step, and costs two Python autograd
    # Functions (~0.2 ms a step). Measured on the modular GPT-2 (one thread): at 124M (wte 38.6M
    # values) it saves 50 ms of 780; at the demo size (7 168 values) it costs 1-5%. Below this
    # many values of wte the gradients go to autograd separately.
    min_elements = 1 << 18

    def __init__(self, weight: torch.Tensor) -> None:
        self.lock = threading.Lock()
        self.grad: Optional[torch.Tensor] = None  # the lm_head's d weight, waiting
        self.encoder_done = False

        def head(x: torch.Tensor) -> torch.Tensor:
            lead = x.shape[:-1]
            w = _HeadWeight.apply(weight, self)
            out = builtin_ops.matmul_op(x.reshape(-1, x.shape[-1]), w, builtin_ops.none_tensor(weight))
            return out.reshape(*lead, weight.shape[0])

        self.head = head

    @classmethod
    def for_call(cls, model: Any, idx64: torch.Tensor) -> Optional["_TiedGrad"]:
        """A hand-over for this forward, or None for the plain path (no gradient to wte, torch
        .compile or another tracer, a subclass tensor, hooks on the lm_head, untied weights)."""
        if not cls.enabled or not sharing.AVAILABLE or not _tie_supported():
            return None
        tr, head = model.transformer, model.lm_head
        w = tr.wte.weight
        if (w.numel() < cls.min_elements or head.weight is not w or head.bias is not None
                or not torch.is_grad_enabled()
                or not w.requires_grad or torch.compiler.is_compiling()
                or _has_forward_hooks(head) or needs_functions()):
            return None
        if not plain_call((idx64, w, tr.wpe.weight)):
            return None
        return cls(w)


class _HeadWeight(torch.autograd.Function):
    """wte as the lm_head reads it (identity); backward: see _TiedGrad."""

    @staticmethod
    def forward(ctx, weight, tie):
        ctx.tie = tie
        return weight.view_as(weight)

    @staticmethod
    def backward(ctx, g):
        tie: _TiedGrad = ctx.tie
        if g is None:
            return None, None
        with tie.lock:
            # ours to write: a plain contiguous buffer no other tensor holds (the matmul sweep's
            # fresh d weight), and no graph being built over the backward (create_graph)
            if (not tie.encoder_done and tie.grad is None and not torch.is_grad_enabled()
                    and type(g) is torch.Tensor and g.is_contiguous() and sharing.unshared(g)):
                tie.grad = g
                return None, None
        return g, None


class _TiedEncoder(torch.autograd.Function):
    """``encoder_forward`` (wte[idx] + wpe[t]) whose generated sweep adds wte's gradient into the
    lm_head's d weight when _HeadWeight left it (see _TiedGrad)."""

    @staticmethod
    def forward(ctx, idx64, wte, wpe, tie):
        ctx.set_materialize_grads(False)
        ctx.tie = tie
        # the recording forward (the ids checked as by the op), its record kept for the one
        # backward without a graph that may consume it; the output saved, not the record's
        (out,), rec = builtin_ops.encoder_op.run_forward((idx64, wte, wpe), record=True)
        builtin_ops.encoder_op.detach_outputs(rec)
        ctx.rec = rec
        ctx.save_for_backward(idx64, wte, wpe, out)
        return out

    @staticmethod
    def backward(ctx, d_out):
        idx64, wte, wpe, out = ctx.saved_tensors
        rec, ctx.rec = ctx.rec, None  # one sweep consumes a tape (retain_graph: recorded again)
        tie: _TiedGrad = ctx.tie
        with tie.lock:
            d_wte, tie.grad = tie.grad, None
            tie.encoder_done = d_wte is None  # the lm_head's backward (if any) is still to come
        if d_out is None:
            return None, d_wte, None, None
        op = builtin_ops.encoder_op
        if torch.is_grad_enabled():
            # a graph over the backward (create_graph): the backward op, differentiable (its
            # double backward), and wte's gradient from the lm_head added to it by autograd
            g = op.backward_op(idx64, wte, wpe, out, d_out)  # (it records again)
            d_wte2, d_wpe = g
            d_wte = d_wte2 if d_wte is None else d_wte + d_wte2
            return (None, d_wte if ctx.needs_input_grad[1] else None,
                    d_wpe if ctx.needs_input_grad[2] else None, None)
        if rec is None or not op.recorded(rec, (out,)):
            _, rec = op.run_forward((idx64, wte, wpe), record=True)
        if d_wte is None:
            d_wte = torch.zeros_like(wte, memory_format=torch.contiguous_format)
        adj = {"wte": d_wte, "wpe": torch.zeros_like(wpe, memory_format=torch.contiguous_format)}
        if op.reads_seeds_only(rec):
            # the sweep that only reads d out (proved by the engine): the grad as it comes
            adj["out"] = d_out.to(wte.dtype).contiguous()
            op.run_sweep_reading_seeds(rec, [adj[w] for w in op.k.adjoints])
        else:
            adj["out"] = d_out.to(wte.dtype).contiguous().clone()  # the sweep zeroes its seed
            op.run_sweep(rec, [adj[w] for w in op.k.adjoints])
        return (None, d_wte if ctx.needs_input_grad[1] else None,
                adj["wpe"] if ctx.needs_input_grad[2] else None, None)
