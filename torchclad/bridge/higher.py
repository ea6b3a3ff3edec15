"""Forward mode and second order for a :class:`~torchclad.bridge.op.KernelOp`: jvp, double
backward, vmap -- all generated from the one kernel.

The kernel's forward-mode derivatives (``f_pushforward``, and ``f_pullback_pushforward``:
forward mode over the generated pullback) are compiled on first use, next to the first-order
module. Two more custom ops use them:

- ``torchclad::<op>_jvp(inputs..., tangents...) -> output tangents``: ``f_pushforward`` with
  the differentiable inputs' tangents (J v);
- ``torchclad::<op>_hvp(inputs..., grads..., v...) -> ...``: ``f_pullback_pushforward`` seeded
  with the output grads g and with the tangents v on the inputs: d/dx (J^T g) v, which is also
  the gradient of <J^T g, v> w.r.t. x (the second derivative of <g, f> is symmetric).

and the autograd formulas compose them:

- ``<op>_backward`` (x, g -> J^T g) has a backward (double backward): d/dx = hvp(x, g, v),
  d/dg = jvp(x, v); ``gradgradcheck`` and ``torch.autograd.grad(create_graph=True)`` work.
  Third order -- a gradient through ``<op>_jvp`` or ``<op>_hvp`` -- is refused.
- :class:`Functions` -- two ``torch.autograd.Function``s, the op and its backward, for
  ``torch.autograd.forward_ad`` and ``torch.func`` (jvp, jacfwd, jacrev, hessian, vmap): the
  op's jvp is the jvp op; its backward is the backward op as a Function whose jvp is
  hvp(x, g, dx) + J^T dg (forward over reverse: ``torch.func.hessian``) and whose backward is
  the double backward above.
- vmap, every op (the forward, the backward, jvp, hvp): the *loop* rule, one call of the kernel
  per batch element, the results stacked on a new leading dimension. Kernels do not say which
  of their sizes a batch could be folded into, so none is.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import torch

from torch.autograd import forward_ad

__all__ = ["Higher", "third_order_error", "needs_functions"]


def needs_functions() -> bool:
    """Whether a call must go through the ``torch.autograd.Function`` pair (which carries a
    jvp): forward AD is on (a ``dual_level``), or a ``torch.func`` transform is active.
    torch has no public way to ask either: this reads ``forward_ad._current_level`` and
    ``torch._C._are_functorch_transforms_active``."""
    return forward_ad_active() or torch._C._are_functorch_transforms_active()


def forward_ad_active() -> bool:
    """Whether forward AD is on (inside a ``dual_level``): ``forward_ad._current_level``."""
    return forward_ad._current_level >= 0


def compile_transform_error(qualname: str) -> RuntimeError:
    """The error of a torch.func transform or forward AD on a torchclad op inside
    torch.compile (Dynamo cannot trace an autograd.Function's jvp, and a custom op alone has
    no forward derivative: its jvp would come out zero)."""
    return RuntimeError(
        f"{qualname}: torch.func transforms and forward AD on a torchclad op are not supported "
        "inside torch.compile (torch 2.13 cannot trace a torch.autograd.Function's jvp, and "
        "the custom op alone has no forward derivative). Run the transform outside "
        "torch.compile; torch.vmap of the custom op alone (torch.ops.torchclad.<op>) compiles.")


def third_order_error(qualname: str, what: str) -> RuntimeError:
    return RuntimeError(
        f"{qualname}: {what} is not supported: torchclad generates the first and second "
        "derivatives of a kernel (the jvp, the backward and its derivatives); a third order "
        "would differentiate a second derivative again. Use torch ops for that part.")


def _refuse(message: RuntimeError):
    def backward(ctx, *grads):
        raise message
    return backward


def _no_context(ctx, inputs, output) -> None:
    pass


def loop_vmap(call: Callable, n_out: int):
    """The vmap rule of an op: ``call`` once per batch element, results stacked at dim 0."""

    def rule(info, in_dims, *args):
        if info.batch_size == 0:
            raise ValueError("torchclad ops do not vmap over an empty batch (batch size 0)")
        cols = []
        for b in range(info.batch_size):
            one = [a.select(d, b) if d is not None else a for a, d in zip(args, in_dims)]
            r = call(*one)
            cols.append(r if isinstance(r, tuple) else (r,))
        out = tuple(torch.stack(list(c)) for c in zip(*cols))
        if n_out == 1:
            return out[0], 0
        return out, (0,) * n_out

    return rule


class Higher:
    """The forward-mode and second-order ops of one KernelOp. ``derive()`` returns the
    kernel's Derivative with modes ("forward", "second") and the extra linker flags its module
    needs (BLAS); it is compiled on first use."""

    def __init__(self, kop: Any, derive: Callable):
        self.kop = kop
        self._derive = derive
        self._kernel = None
        self._lock = threading.Lock()
        self.n_in = len(kop.inputs)
        self.n_g = len(kop.diff_out) + kop.ret_diff
        self._define()
        self.functions = Functions(kop, self)

    def kernel(self):
        """The compiled forward-mode derivatives (built on first use, then cached)."""
        if self._kernel is None:
            with self._lock:
                if self._kernel is None:
                    from torchclad import toolchain
                    from torchclad.bridge.kernel import Kernel

                    d, ldflags = self._derive()
                    module = toolchain.load(d, extra_ldflags=ldflags, native=True)
                    self._kernel = Kernel(d, module)
        return self._kernel

    # ---- the two ops

    def _define(self) -> None:
        kop, n_in, n_g = self.kop, self.n_in, self.n_g
        q = kop.qualname
        n_d = len(kop.diff_in)
        ins = [f"Tensor i{j}" for j in range(n_in)]

        def schema(args: list, n_ret: int) -> str:
            rets = ["Tensor"] * n_ret
            return f"({', '.join(args)}) -> " + (rets[0] if n_ret == 1 else f"({', '.join(rets)})")

        self.jvp_op = torch.library.custom_op(
            f"{q}_jvp", mutates_args=(),
            schema=schema(ins + [f"Tensor t{j}" for j in range(n_d)], n_g))(self.jvp_impl)
        self.hvp_op = torch.library.custom_op(
            f"{q}_hvp", mutates_args=(),
            schema=schema(ins + [f"Tensor g{j}" for j in range(n_g)] +
                          [f"Tensor v{j}" for j in range(n_d)], n_d))(self.hvp_impl)
        self.jvp_op.register_fake(self._jvp_fake)
        self.hvp_op.register_fake(self._hvp_fake)
        self.jvp_op.register_autograd(self._jvp_backward, setup_context=self._save_inputs)
        self.hvp_op.register_autograd(_refuse(third_order_error(q, "a third derivative")),
                                      setup_context=_no_context)
        kop.backward_op.register_autograd(self._double_backward,
                                          setup_context=self._save_inputs)
        n_out = kop.n_out
        for op, n in ((kop.op, n_out), (kop.backward_op, n_d), (self.jvp_op, n_g),
                      (self.hvp_op, n_d)):
            op.register_vmap(loop_vmap(op._opoverload, n))

    def _jvp_fake(self, *args):
        outs = self.kop.planner.fake_outputs(args[:self.n_in])
        res = [outs[i] for i in self.kop.diff_out] + ([outs[-1]] if self.kop.ret_diff else [])
        return res[0] if len(res) == 1 else tuple(res)

    def _hvp_fake(self, *args):
        res = [torch.empty_like(args[i], memory_format=torch.contiguous_format)
               for i in self.kop.diff_in]
        return res[0] if len(res) == 1 else tuple(res)

    def jvp_impl(self, *args):
        """J v: the output tangents of ``f_pushforward`` (the differentiable outputs', then
        the return value's)."""
        kop, k = self.kop, self.kernel()
        ins, ts = args[:self.n_in], args[self.n_in:]
        plan, bufs, call = kop.bind(ins)
        given = {kop.inputs[i]: t for i, t in zip(kop.diff_in, ts)}
        tangents = self._tangent_buffers(k, k.sig.tangents, bufs, given)
        call += [tangents[w] if isinstance(tangents[w], float) else tangents[w].data_ptr()
                 for w in k.sig.tangents]
        r = k.binding("pushforward", plan.scalar)(*call)
        res = [tangents[kop.out_names[i]] for i in kop.diff_out]
        if kop.ret_diff:
            res.append(torch.full((), r[1], dtype=plan.ret_dtype))
        return res[0] if len(res) == 1 else tuple(res)

    def hvp_impl(self, *args):
        """d/dx (J^T g) v: the input adjoints' tangents of ``f_pullback_pushforward``."""
        kop, k = self.kop, self.kernel()
        n_in, n_g = self.n_in, self.n_g
        ins, gs, vs = args[:n_in], args[n_in:n_in + n_g], args[n_in + n_g:]
        plan, bufs, call = kop.bind(ins)
        adj = self._adjoints(k, bufs, gs, plan.scalar)
        names = [p.name for p in k.params]
        seed = [float(gs[-1]) if kop.ret_diff else 0.0] if k.ret is not None else []
        given = {kop.inputs[i]: v for i, v in zip(kop.diff_in, vs)}
        pt = self._tangent_buffers(k, names, bufs, given)
        dadj = {w: torch.zeros_like(a) for w, a in adj.items()}
        second = []
        n, ns = len(names), len(seed)
        for i in k.sig.second_mask:
            if i < n:
                t = pt[names[i]]
                second.append(t if isinstance(t, float) else t.data_ptr())
            elif i < n + ns:
                second.append(0.0)                     # the seed's tangent
            else:
                second.append(dadj[k.adjoints[i - n - ns]].data_ptr())
        k.binding("pullback_pushforward", plan.scalar)(
            *call, *seed, *[adj[w].data_ptr() for w in k.adjoints], *second)
        res = [dadj[kop.inputs[i]] for i in kop.diff_in]
        return res[0] if len(res) == 1 else tuple(res)

    @staticmethod
    def _tangent_buffers(k, names, bufs: dict, given: dict) -> dict:
        """A tangent per parameter name: zeros (a float 0 for a scalar), the given tangent's
        values for a differentiable input."""
        out = {}
        for w in names:
            p = k.by_name[w]
            if not p.pointer:
                out[w] = 0.0
                continue
            t = torch.zeros_like(bufs[w], memory_format=torch.contiguous_format)
            if w in given:
                t.copy_(given[w].reshape(t.shape))
            out[w] = t
        return out

    def _adjoints(self, k, bufs: dict, gs, scalar: str) -> dict:
        """The adjoint buffers of ``f_pullback``: zeros, the outputs' seeded with copies of
        their grads (the pullback zeroes them as it reads them)."""
        kop = self.kop
        seeds = {kop.out_names[i]: g for i, g in zip(kop.diff_out, gs)}
        out = {}
        for w in k.adjoints:
            p = k.by_name[w]
            if not p.pointer:
                out[w] = torch.zeros((), dtype=k.dtype_of(p, scalar))
            elif w in seeds:
                out[w] = seeds[w].to(bufs[w].dtype).reshape(bufs[w].shape).clone(
                    memory_format=torch.contiguous_format)
            else:
                out[w] = torch.zeros_like(bufs[w], memory_format=torch.contiguous_format)
        return out

    # ---- double backward: the backward op's own autograd formula

    @staticmethod
    def _save_inputs(ctx, inputs, output) -> None:
        ctx.save_for_backward(*inputs)

    def _double_backward(self, ctx, *vs):
        """<op>_backward(x, outs, g) = J^T g: d/dx = hvp(x, g, v), d/dg = J v."""
        return self.second(ctx.saved_tensors, vs)

    def _jvp_backward(self, ctx, *ws):
        """<op>_jvp(x, t) = J t (reverse over forward): d/dx = hvp(x, w, t), d/dt = J^T w."""
        kop, n_in = self.kop, self.n_in
        saved = ctx.saved_tensors
        ins, ts = saved[:n_in], saved[n_in:]
        outs = kop.op._opoverload(*ins)
        outs = outs if isinstance(outs, tuple) else (outs,)
        ws = _split_grads(kop, outs, tuple(
            _scatter(ws, kop.diff_out + ([kop.n_out - 1] if kop.ret_diff else []), kop.n_out)))
        hv = self.hvp_op(*ins, *ws, *ts)
        jt = kop.backward_op(*ins, *outs, *ws)
        hv = hv if isinstance(hv, tuple) else (hv,)
        jt = jt if isinstance(jt, tuple) else (jt,)
        return tuple(_scatter(hv, kop.diff_in, n_in)) + jt

    def second(self, saved, vs) -> tuple:
        kop, n_in = self.kop, self.n_in
        ins, outs, gs = saved[:n_in], saved[n_in:n_in + kop.n_out], saved[n_in + kop.n_out:]
        vs = [v if v is not None else torch.zeros_like(ins[i])
              for i, v in zip(kop.diff_in, vs)]
        hv = self.hvp_op(*ins, *gs, *vs)
        jv = self.jvp_op(*ins, *vs)
        hv = hv if isinstance(hv, tuple) else (hv,)
        jv = jv if isinstance(jv, tuple) else (jv,)
        full: list = [None] * n_in
        for i, h in zip(kop.diff_in, hv):
            full[i] = h
        return tuple(full) + (None,) * kop.n_out + tuple(jv)


class Functions:
    """The op and its backward as ``torch.autograd.Function``s with jvp (forward AD,
    ``torch.func``): ``op`` (call ``op.apply(*inputs)``) and ``backward``."""

    def __init__(self, kop: Any, higher: Higher):
        self.backward = _backward_function(kop, higher)
        self.op = _op_function(kop, higher, self.backward)


def _scatter(values, at, n: int) -> list:
    """A list of n Nones with values[j] at position at[j]."""
    full: list = [None] * n
    for i, v in zip(at, values):
        full[i] = v
    return full


def _split_grads(kop: Any, outs: tuple, grads: tuple) -> list:
    """The grads of the differentiable outputs (zeros for None), then the return value's."""
    gs = [grads[i] if grads[i] is not None else torch.zeros_like(outs[i]) for i in kop.diff_out]
    if kop.ret_diff:
        gs.append(grads[-1] if grads[-1] is not None else torch.zeros_like(outs[-1]))
    return gs


def _op_function(kop: Any, higher: Higher, bwd: type) -> type:
    floating = (torch.float32, torch.float64)

    class Op(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(*ins):
            return kop.op._opoverload(*ins)

        @staticmethod
        def setup_context(ctx, inputs, output):
            outs = output if isinstance(output, tuple) else (output,)
            ctx.save_for_backward(*inputs, *outs)
            ctx.save_for_forward(*inputs)
            frozen = [o for o in outs if o.dtype not in floating]
            if frozen:
                ctx.mark_non_differentiable(*frozen)

        @staticmethod
        def backward(ctx, *grads):
            saved = ctx.saved_tensors
            ins, outs = saved[:higher.n_in], saved[higher.n_in:]
            res = bwd.apply(*ins, *outs, *_split_grads(kop, outs, grads))
            res = res if isinstance(res, tuple) else (res,)
            full: list = [None] * higher.n_in
            for i, g in zip(kop.diff_in, res):
                full[i] = g
            return tuple(full) if higher.n_in > 1 else full[0]

        @staticmethod
        def jvp(ctx, *tangents):
            ins = ctx.saved_tensors[:higher.n_in]
            ts = [tangents[i] if tangents[i] is not None else torch.zeros_like(ins[i])
                  for i in kop.diff_in]
            r = higher.jvp_op(*ins, *ts)
            r = list(r) if isinstance(r, tuple) else [r]
            full: list = [None] * kop.n_out
            for i in kop.diff_out:
                full[i] = r.pop(0)
            if kop.ret_diff:
                full[-1] = r.pop(0)
            return tuple(full) if kop.n_out > 1 else full[0]

    Op.__name__ = Op.__qualname__ = f"torchclad_{kop.opname}_function"
    return Op


def _backward_function(kop: Any, higher: Higher) -> type:
    n_in, n_out = higher.n_in, kop.n_out

    class Backward(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(*args):
            return kop.backward_op._opoverload(*args)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs)
            ctx.save_for_forward(*inputs)

        @staticmethod
        def backward(ctx, *vs):
            return higher.second(ctx.saved_tensors, vs)

        @staticmethod
        def jvp(ctx, *tangents):
            # d(J^T g) = hvp(x, g, dx) + J^T dg   (forward over reverse)
            saved = ctx.saved_tensors
            ins, outs, gs = saved[:n_in], saved[n_in:n_in + n_out], saved[n_in + n_out:]
            dx = [tangents[i] if tangents[i] is not None else torch.zeros_like(ins[i])
                  for i in kop.diff_in]
            dg = [t if t is not None else torch.zeros_like(g)
                  for t, g in zip(tangents[n_in + n_out:], gs)]
            hv = higher.hvp_op(*ins, *gs, *dx)
            jt = kop.backward_op(*ins, *outs, *dg)
            hv = hv if isinstance(hv, tuple) else (hv,)
            jt = jt if isinstance(jt, tuple) else (jt,)
            res = tuple(a + b for a, b in zip(hv, jt))
            return res if len(res) > 1 else res[0]

    Backward.__name__ = Backward.__qualname__ = f"torchclad_{kop.opname}_backward_function"
    return Backward
