"""The autograd glue of a :class:`~torchclad.bridge.op.KernelOp`.

- The registered op's formula saves inputs and outputs and calls ``torchclad::<op>_backward(
  inputs..., outputs..., grads...) -> input grads``, itself a custom op, so that a traced
  backward (torch.compile, opcheck) records it; plain eager backward calls its implementation
  directly, skipping a second dispatcher round trip.
- The fast lane (``KernelOp.__call__`` in plain eager autograd) is a ``torch.autograd.Function``
  running the same forward and sweep, the record held by the autograd node instead of the
  output's storage (the dispatcher round trip of a Python custom op costs about as much as a
  small kernel). The record does not hold the outputs either (they point to the node): a
  forward whose backward never runs frees everything.
- Double backward raises: the backward op's own autograd formula refuses it.

Both backwards share :func:`_backward`: the grads handed to the sweep and the input grads
handed back to autograd.
"""

from __future__ import annotations

from typing import Any

import torch
# private: torch has no public way to ask for the active dispatch mode (see plain_call)
from torch.utils._python_dispatch import _get_current_dispatch_mode as _current_dispatch_mode

_PLAIN = (torch.Tensor, torch.nn.Parameter)
_FLOATING = (torch.float32, torch.float64)


def plain_call(ins) -> bool:
    """A call the fast lane may take: ordinary CPU tensors, no dispatch mode, no functorch
    transform, no tracing (the checks of the op itself -- dtypes, shapes -- still run).

    torch has no public API that says whether a dispatch mode (fake tensors, FX, opcheck) or a
    functorch transform is active: this asks ``torch.utils._python_dispatch`` and
    ``torch._C._are_functorch_transforms_active``, private, here and in :func:`plain_eager`
    only."""
    if _current_dispatch_mode() is not None or torch._C._are_functorch_transforms_active():
        return False
    if torch.jit.is_tracing():
        return False
    return all(type(t) in _PLAIN for t in ins)


def plain_eager(*groups) -> bool:
    """Eager autograd on ordinary tensors, with no graph to record (create_graph=False)."""
    if torch.is_grad_enabled() or _current_dispatch_mode() is not None:
        return False
    if torch.compiler.is_compiling():
        return False
    return all(type(t) in _PLAIN for g in groups for t in g)


def _backward(kop: Any, saved: tuple, grads: tuple, sweep) -> list:
    """The input grads (None for the non-differentiable inputs) of one backward.

    ``sweep(ins, outs, gs)`` computes the grads of the differentiable inputs from ``gs``, one
    grad per differentiable output then the return value's; it is given None for a missing
    output grad (the sweep seeds zeros) -- except with grad mode on (create_graph=True), where
    the zeros are made here and the backward op runs, the one that refuses to go on."""
    n_in = len(kop.inputs)
    ins, outs = saved[:n_in], saved[n_in:]
    gs = [grads[i] for i in kop.diff_out]
    if kop.ret_diff:
        gs.append(grads[-1] if grads[-1] is not None else torch.zeros_like(outs[-1]))
    if torch.is_grad_enabled():
        res = kop.backward_op(*ins, *outs, *_zeros_for_none(kop, outs, gs))
    else:
        res = sweep(ins, outs, gs)
    res = res if isinstance(res, tuple) else (res,)
    full: list[Any] = [None] * n_in
    for i, g in zip(kop.diff_in, res):
        full[i] = g
    return full


def _zeros_for_none(kop: Any, outs: tuple, gs: list) -> list:
    """``gs`` with zeros for the missing grads of the differentiable outputs."""
    return [g if g is not None else torch.zeros_like(outs[i])
            for i, g in zip(kop.diff_out, gs)] + gs[len(kop.diff_out):]


def register(kop: Any) -> None:
    """Define ``torchclad::<op>_backward`` (with its fake and the refusal of double backward)
    and register the autograd formula of ``kop.op``."""
    n_in = len(kop.inputs)
    n_g = len(kop.diff_out) + kop.ret_diff
    bargs = ([f"Tensor i{j}" for j in range(n_in)]
             + [f"Tensor o{j}" for j in range(kop.n_out)]
             + [f"Tensor g{j}" for j in range(n_g)])
    brets = ["Tensor"] * len(kop.diff_in)
    bschema = f"({', '.join(bargs)}) -> " + (brets[0] if len(brets) == 1 else f"({', '.join(brets)})")
    kop.backward_op = torch.library.custom_op(
        f"{kop.qualname}_backward", mutates_args=(), schema=bschema)(kop.backward_impl)

    def backward_fake(*args):
        ins = args[:n_in]
        res = [torch.empty_like(ins[i], memory_format=torch.contiguous_format)
               for i in kop.diff_in]
        return res[0] if len(res) == 1 else tuple(res)

    kop.backward_op.register_fake(backward_fake)
    kop.backward_op.register_autograd(_refuse_double_backward(kop.qualname),
                                      setup_context=_no_context)

    def setup_context(ctx, inputs, output):
        outs = output if isinstance(output, tuple) else (output,)
        ctx.save_for_backward(*inputs, *outs)

    def sweep(ins, outs, gs):
        gs = _zeros_for_none(kop, outs, gs)
        if plain_eager(ins, outs, gs):
            # Same code the backward op runs, without a second trip through the dispatcher.
            return kop.backward_impl(*ins, *outs, *gs)
        return kop.backward_op(*ins, *outs, *gs)  # tracing (torch.compile, opcheck)

    def backward(ctx, *grads):
        full = _backward(kop, ctx.saved_tensors, grads, sweep)
        return full[0] if n_in == 1 else tuple(full)

    kop.op.register_autograd(backward, setup_context=setup_context)


def make_function(kop: Any) -> type:
    """The fast lane's ``torch.autograd.Function`` of ``kop``."""

    class Function(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *ins):
            outs, rec = kop.run_forward(ins, record=True)
            ctx.set_materialize_grads(False)  # a grad that is None seeds zeros in the sweep
            # The node holds the record and the outputs point to the node: the record must not
            # hold them (a forward whose backward never runs would leak them through the
            # cycle); backward gets them from the saved tensors.
            kop.detach_outputs(rec)
            ctx.torchclad_record = rec
            ctx.save_for_backward(*ins, *outs)
            if kop.frozen_outputs:
                frozen = [o for o in outs if o.dtype not in _FLOATING]
                if frozen:
                    ctx.mark_non_differentiable(*frozen)
            return outs[0] if len(outs) == 1 else tuple(outs)

        @staticmethod
        def backward(ctx, *grads):
            rec, ctx.torchclad_record = ctx.torchclad_record, None  # one sweep per tape
            return tuple(_backward(kop, ctx.saved_tensors, grads,
                                   lambda ins, outs, gs: kop.sweep(ins, outs, gs, rec)))

    Function.__name__ = Function.__qualname__ = f"torchclad_{kop.opname}"
    return Function


def _no_context(ctx, inputs, output) -> None:
    pass


def double_backward_error(qualname: str) -> RuntimeError:
    """The error of a gradient of the gradient through op ``qualname``."""
    return RuntimeError(
        f"{qualname}: double backward (a gradient of the gradient) is not supported: "
        "the engine generates first-order reverse mode only. Use create_graph=False, or "
        "torch.func / a torch implementation for higher-order derivatives."
    )


def _refuse_double_backward(qualname: str):
    def backward(ctx, *grads):
        raise double_backward_error(qualname)
    return backward


def backward_of(kop: Any, ins: tuple, outs: tuple, grads: tuple) -> list:
    """The input grads (None for the non-differentiable inputs) of ``kop`` for ``grads`` (one
    per output of the op, None for a missing one), by the same backward as the registered op's
    formula. The C++ fast path (torchclad.bridge.fastpath) calls it under create_graph=True."""
    return _backward(kop, (*ins, *outs), grads, lambda i, o, g: kop.sweep(i, o, g, None))
