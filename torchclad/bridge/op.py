"""``torchclad.function``: a C++ kernel as a differentiable ``torch.library`` custom op.

::

    gelu = torchclad.function(src, "gelu_forward", inputs=["inp"],
                              outputs={"out": lambda inp: inp.shape},
                              sizes={"N": lambda inp: inp.numel()})
    y = gelu(x)                 # torch.ops.torchclad.gelu_forward_<hash>(x)

How the op is put together (split mode):

- ``torchclad::<op>(inputs...) -> outputs`` runs ``f_reverse_forw``, which records what the
  reverse sweep needs on a fresh ``Tape``. The tape, the call's arguments and the input buffers
  the forward ran on form a :class:`~torchclad.bridge.plan.Record`, attached to the storage of
  the op's first output (not owning the outputs: that would be a cycle through C++). It lives
  exactly as long as that output: nothing leaks when backward never runs, and no registry or
  extra output is needed, so ``opcheck`` and ``torch.compile`` see a plain op.
- Its backward (:mod:`torchclad.bridge.autograd`) finds the record through the saved output,
  seeds the output adjoints with copies of the incoming grads (adjoints accumulate) and runs
  ``f_reverse_sweep`` only, on the very buffers of the forward; outputs the sweep restores are
  put back afterwards, since they are the caller's tensors.
- One sweep consumes a record. A second backward through the same graph (``retain_graph=True``,
  ``gradcheck``), or an output whose record is gone, recomputes the record from the saved inputs
  by running ``f_reverse_forw`` again: the gradient never depends on the record's bookkeeping.
- With grad mode on inside the op (the dispatcher's no-autograd path) or under
  ``torch.inference_mode()``, the plain forward ``f`` runs and nothing is recorded.
- Calling the :class:`KernelOp` itself (what the ``torchclad.nn`` modules do) is the same op
  with a fast lane for plain eager autograd (:func:`torchclad.bridge.autograd.make_function`).
  Anything else -- ``torch.compile``, a dispatch mode (fake tensors, opcheck, FX), tensor
  subclasses, functorch transforms, tracing -- takes the custom op. Without grad (no input
  requires it, or grad mode off) the lane runs the plain forward and records nothing.
- Checks, output shapes and sizes are worked out once per call signature
  (:mod:`torchclad.bridge.plan`); the sweep's seeds come from a pool
  (:mod:`torchclad.bridge.scratch`). A reverse sweep that never restores memory from the tape
  (``torchclad.toolchain.signature.sweep_restores``, the case of every built-in kernel) leaves
  the forward's outputs alone, so they are not copied around it; ``zero_outputs=False``
  (built-in kernels, which write every element of their outputs) allocates outputs without
  zero-filling them.
"""

from __future__ import annotations

import ctypes
import keyword
import threading
from typing import Any, Callable, Mapping, Sequence

import torch
from torch._library.custom_ops import CustomOpDef

from torchclad.bridge import autograd, fastpath, guard, higher, spec
from torchclad.bridge.kernel import Kernel
from torchclad.bridge.memory import PLAIN
from torchclad.bridge.plan import Planner, Record
from torchclad.bridge.scratch import SweepBuffers
from torchclad.toolchain.clib import KernelFault
from torchclad.toolchain.signature import sweep_restores

__all__ = ["KernelOp", "kernel_op", "make_op", "op_identifier", "RECORD_ATTR", "CallableOp"]

NAMESPACE = "torchclad"
#: the attribute of an output's storage that holds the op's :class:`Record`
RECORD_ATTR = "_torchclad_record"
_ops_lock = threading.Lock()
_ops: dict[str, "KernelOp"] = {}


def make_op(kernel: Kernel, opname: str, *, inputs: Sequence[str], outputs: Mapping,
            sizes: Mapping | None = None, zero_outputs: bool = True,
            static_sizes: Sequence[str] = (), contract: spec.Contract | None = None,
            debug: bool = False, user_file: str = "kernel.cpp",
            higher_order: Callable | None = None) -> "KernelOp":
    """The :class:`KernelOp` ``torchclad::<opname>``; reused if the same spec made it before.

    ``zero_outputs=False``: the kernel writes every element of each output (so they need not be
    zero-filled before it runs). ``static_sizes``: the size parameters whose functions depend on
    the inputs' shapes and dtypes only (no value checks): their values are cached per call
    signature with the output shapes, instead of being recomputed on every call. ``contract``:
    the shape contract checked on every new call signature. ``debug``: the kernel is a debug
    build (guarded buffers, faults raised as :class:`~torchclad.bridge.guard.MemoryFault`
    naming the array; ``user_file`` is the kernel's file name in messages). ``higher_order``:
    ``() -> (Derivative with modes ("forward", "second"), extra linker flags)``, compiled on
    first use for the op's jvp, double backward and vmap (:mod:`torchclad.bridge.higher`)."""
    options = dict(zero_outputs=bool(zero_outputs), static_sizes=frozenset(static_sizes),
                   contract=contract, debug=bool(debug), user_file=user_file)
    with _ops_lock:
        base, n = opname, 1
        while opname in _ops:
            old = _ops[opname]
            if old.same_spec(kernel, inputs, outputs, sizes or {}) and old.options == options:
                return old
            n += 1
            opname = f"{base}_{n}"
        op = KernelOp(kernel, opname, inputs=inputs, outputs=outputs, sizes=sizes or {},
                      higher_order=higher_order, **options)
        _ops[opname] = op
        return op


class CallableOp(CustomOpDef):
    """The custom op of a :class:`KernelOp`: still a ``CustomOpDef`` (``opcheck``,
    ``register_*``, ``torch.compile`` see the op), whose call goes through
    :meth:`KernelOp.__call__` -- the eager fast lane when it can, the autograd.Function pair
    with a jvp under forward AD or a ``torch.func`` transform, the op otherwise."""

    torchclad_op: "KernelOp"

    def __call__(self, *args, **kwargs):
        if kwargs or (torch.compiler.is_compiling() and not higher.needs_functions()):
            return super().__call__(*args, **kwargs)
        return self.torchclad_op(*args)


def kernel_op(op: Any) -> "KernelOp":
    """The :class:`KernelOp` behind a custom op made here (``CustomOpDef`` or its name)."""
    name = op if isinstance(op, str) else getattr(op, "_name", None)
    if isinstance(name, str) and name.startswith(f"{NAMESPACE}::"):
        name = name.split("::", 1)[1]
    try:
        return _ops[name]
    except KeyError:
        raise KeyError(f"{op!r} is not an op made by torchclad.function") from None


def op_identifier(s: str) -> str:
    """``s`` as an op name: every character but letters, digits and ``_`` becomes ``_``, and a
    leading digit (or an empty ``s``) gets a ``k_`` prefix."""
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in s)
    return out if out and not out[0].isdigit() else "k_" + out


def _arg_name(s: str) -> str:
    return s + "_" if keyword.iskeyword(s) or s in ("self", "out") else s


class KernelOp:
    """A kernel bound as ``torchclad::<opname>`` (forward) + ``<opname>_backward``.

    ``op`` is the custom op; calling the KernelOp runs it, by the eager fast lane when it can.
    :meth:`run_forward` and :meth:`run_sweep` are the two halves of split mode, for callers
    that manage the adjoints themselves."""

    def __init__(self, kernel: Kernel, opname: str, *, inputs, outputs, sizes,
                 zero_outputs: bool = True, static_sizes: Sequence[str] = (),
                 contract: spec.Contract | None = None, debug: bool = False,
                 user_file: str = "kernel.cpp", higher_order: Callable | None = None):
        self.k = k = kernel
        self.opname = opname
        self.qualname = f"{NAMESPACE}::{opname}"
        self.inputs = tuple(inputs)
        self.outputs = dict(outputs)
        self.sizes = dict(sizes)
        self.zero_outputs = bool(zero_outputs)
        self.static_sizes = frozenset(static_sizes)
        self.options = dict(zero_outputs=self.zero_outputs, static_sizes=self.static_sizes,
                            contract=contract, debug=bool(debug), user_file=user_file)
        self.debug, self.user_file = bool(debug), user_file
        self.memory = guard.GUARDED if debug else PLAIN
        spec.check(k, self.inputs, self.outputs, self.sizes)
        unknown = self.static_sizes - set(self.sizes)
        if unknown:
            raise ValueError(f"static_sizes: {sorted(unknown)} are not in sizes")
        # May the reverse sweep write the forward's memory (restore from the tape)? A built-in
        # kernel's signature says (recorded at build time); a Derivative is checked here.
        restores = getattr(k.sig, "restores", None)
        self.sweep_restores = (sweep_restores(k.sig) if restores is None else bool(restores))
        self.out_names = tuple(self.outputs)
        self.has_ret = k.ret is not None
        self.n_out = len(self.out_names) + self.has_ret
        # Differentiable inputs (floating, with an adjoint) and outputs (floating), by position.
        self.diff_in = [i for i, n in enumerate(self.inputs)
                        if k.is_float(k.by_name[n]) and n in k.adjoints]
        self.diff_out = [i for i, n in enumerate(self.out_names) if k.is_float(k.by_name[n])]
        self.ret_diff = self.has_ret and k.is_float(k.ret)
        self.planner = Planner(opname, k, self.inputs, self.outputs, self.sizes,
                               self.static_sizes, contract=contract)
        self._plan = self.planner.plan  # bound once: the per-call path
        self._out_dtypes = self.planner.out_dtypes
        # Precomputed for the per-call path: the arrays the kernel may write are worked on as
        # copies (a scalar input is passed by value: neither).
        self.in_copy = tuple(k.by_name[n].pointer and not (k.by_name[n].const
                                                             and n not in self.outputs)
                              for n in self.inputs)
        self._out_arg_index = tuple(k.params.index(k.by_name[n]) for n in self.out_names)
        self._res_adj_index = tuple(k.adjoints.index(self.inputs[i]) for i in self.diff_in)
        # Some output is not floating (for some scalar type): marked non-differentiable.
        self.frozen_outputs = any(d not in (torch.float32, torch.float64)
                                  for ds in self._out_dtypes.values() for d in ds) or (
            self.has_ret and not k.is_float(k.ret))
        self.buffers = SweepBuffers(k, self.inputs, self.out_names, self.diff_in, self.diff_out,
                                    zero_pool=not self.zero_outputs, memory=self.memory)
        self.higher = None
        self._define(higher_order)
        self._function = autograd.make_function(self)
        #: the C++ eager path (torchclad.bridge.fastpath), None where there is none
        self.fast = fastpath.kernel_call(self)

    def same_spec(self, kernel, inputs, outputs, sizes) -> bool:
        return (kernel.sig == self.k.sig and tuple(inputs) == self.inputs
                and dict(outputs) == self.outputs and dict(sizes) == self.sizes)

    def __repr__(self) -> str:
        return f"<torchclad op {self.qualname} ({self.k.name})>"

    # ---- the schema

    def _define(self, derive_higher: Callable | None) -> None:
        """Register the custom op, its fake and (with differentiable inputs) its autograd, and
        with ``derive_higher`` the jvp, double backward and vmap of
        :mod:`torchclad.bridge.higher`."""
        in_names = [_arg_name(n) for n in self.inputs]
        rets = ["Tensor"] * self.n_out
        schema = f"({', '.join('Tensor ' + n for n in in_names)}) -> " + (
            rets[0] if len(rets) == 1 else f"({', '.join(rets)})")
        self.op = torch.library.custom_op(self.qualname, mutates_args=(), schema=schema)(self._impl)
        self.overload = getattr(getattr(torch.ops, NAMESPACE), self.opname).default
        # Calling the custom op takes the eager fast lane when it can (CallableOp).
        self.op.__class__ = CallableOp
        self.op.torchclad_op = self
        self.op.register_fake(self._fake)
        if self.diff_in:
            autograd.register(self)
        if self.diff_in and derive_higher is not None:
            self.higher = higher.Higher(self, derive_higher)
            self.op.torchclad_functions = self.higher.functions

    def _fake(self, *ins):
        outs = self.planner.fake_outputs(ins)
        return outs[0] if len(outs) == 1 else tuple(outs)

    # ---- calls

    def __call__(self, *ins):
        """The custom op, by the fast lane when that is plain eager autograd: in C++ when the
        kernel has a ``KernelCall`` (it declines what it does not take), else in Python; by
        the autograd.Function pair with a jvp under forward AD or a torch.func transform."""
        fast = self.fast
        # The usual call goes straight to C++, which declines (NotImplemented) under a dispatch
        # mode, a functorch transform or tracing, for a tensor subclass, and for any input it
        # does not take: the checks below then decide, and explain.
        if (fast is not None and not torch.compiler.is_compiling()
                and (self.higher is None or not higher.forward_ad_active())):
            out = fast(*ins)
            if out is not NotImplemented:
                return out
        if self.higher is not None and higher.needs_functions():
            if torch.compiler.is_compiling():
                raise higher.compile_transform_error(self.qualname)
            return self.higher.functions.op.apply(*ins)
        if torch.compiler.is_compiling() or not autograd.plain_call(ins):
            return self.overload(*ins)
        if not (torch.is_grad_enabled() and any(t.requires_grad for t in ins)):
            outs, _ = self.run_forward(ins, record=False)
            return outs[0] if len(outs) == 1 else tuple(outs)
        return self._function.apply(*ins)

    def _impl(self, *ins):
        # Inside the autograd formula's forward grad mode is off; grad mode on here means the
        # dispatcher took the no-autograd path, so nothing will ever need a tape.
        record = not torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
        outs, rec = self.run_forward(ins, record)
        if rec is not None:
            # The output's storage owns the record (see detach_outputs).
            self.detach_outputs(rec)
            setattr(outs[0].untyped_storage(), RECORD_ATTR, rec)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def backward_impl(self, *args):
        """The implementation of ``<op>_backward(inputs..., outputs..., grads...)``."""
        n_in, n_out = len(self.inputs), self.n_out
        ins, outs, grads = args[:n_in], args[n_in:n_in + n_out], args[n_in + n_out:]
        storage = outs[0].untyped_storage()
        rec = getattr(storage, RECORD_ATTR, None)
        if rec is not None:
            delattr(storage, RECORD_ATTR)  # one sweep consumes a tape
        return self.sweep(ins, outs, grads, rec)

    # ---- split mode: the forward and the reverse sweep

    def bind(self, ins: Sequence[torch.Tensor]):
        """``(plan, bufs, args)`` of one call: the buffers the kernel runs on (a copy of each
        input it may write, the outputs allocated) and its argument list (addresses, sizes)."""
        plan = self._plan(ins)
        mem = self.memory
        bufs: dict[str, torch.Tensor] = {}
        # (no autograd graph is recorded here: the fast lane's Function.forward and the op's
        # implementation run without it, so the inputs need no detach)
        for n, t, copy in zip(self.inputs, ins, self.in_copy):
            # a const input is read in place; one the kernel may write is worked on as a copy
            bufs[n] = mem.copy(t) if copy else mem.readable(t)
        alloc = mem.zeros if self.zero_outputs else mem.empty
        for n, shape, dtype in plan.outs:
            bufs[n] = alloc(shape, dtype)
        return plan, bufs, self._args(plan, ins, bufs)

    def run_forward(self, ins: Sequence[torch.Tensor], record: bool):
        """Run the kernel on ``ins`` (checked); returns ``(outputs, Record or None)``: with
        ``record``, ``f_reverse_forw`` runs and the record holds what the sweep needs."""
        plan, bufs, args = self.bind(ins)
        scalar = plan.scalar
        if self.debug:
            self._check_run(plan, ins, bufs)
        rec = None
        if record:
            tape = self.k.new_tape(scalar)
            ret = self._call("reverse_forw", scalar, (*args, tape), bufs,
                             "the recording forward (generated)")
            rec = Record(tape, args, bufs, scalar)
        else:
            ret = self._call("", scalar, args, bufs, "the forward")
        outs = [bufs[n] for n in self.out_names]
        if self.has_ret:
            outs.append(torch.full((), ret, dtype=plan.ret_dtype))
        return outs, rec

    @staticmethod
    def _args(plan, ins, bufs) -> list:
        """The kernel's arguments: the plan's, with the buffers' addresses and the sizes."""
        args = plan.args.copy()
        for i, name in plan.ptr:
            args[i] = bufs[name].data_ptr()
        for i, fn, conv in plan.dyn:
            v = fn(*ins)
            args[i] = conv(v.item() if isinstance(v, torch.Tensor) else v)
        return args

    def _call(self, kind: str, scalar: str, args, arrays: Mapping[str, torch.Tensor],
              stage: str):
        """Call binding ``kind``; in a debug op a caught fault becomes a MemoryFault naming the
        array (``arrays``: the call's buffers by parameter or adjoint name)."""
        fn = self.k.binding(kind, scalar)
        if not self.debug:
            return fn(*args)
        try:
            return fn(*args)
        except KernelFault as f:
            labels = {(f"'{n}'" if n in self.k.by_name else
                       f"the gradient of '{n.removeprefix('d:')}'"): t
                      for n, t in arrays.items()}
            raise guard.explain(f, labels, op=f"{self.k.name} (debug build)",
                                user_file=self.user_file, stage=stage) from None

    def _check_run(self, plan, ins, bufs) -> None:
        """Debug ops: the user's own forward first, on copies, so that a fault in it is reported
        at their source line (the recording forward that follows is generated code)."""
        mem = self.memory
        scratch = {n: mem.copy(t) for n, t in bufs.items()}
        self._call("", plan.scalar, self._args(plan, ins, scratch), scratch, "the forward")

    def run_sweep(self, rec: Record, adjoints: Sequence[torch.Tensor],
                  result_seed: float = 0, bufs: Mapping[str, torch.Tensor] | None = None
                  ) -> None:
        """Run ``f_reverse_sweep`` on the tape of ``rec`` (consumed): ``adjoints`` are
        contiguous tensors, one per name of ``self.k.adjoints`` in that order; the sweep
        accumulates into the input adjoints and zeroes the output adjoints (the seeds) as it
        reads them. ``result_seed`` seeds a non-void kernel's return value. ``bufs``: the
        buffers the sweep runs on, by name (default ``rec.bufs``; for a debug op's messages)."""
        self._sweep_call("reverse_sweep", rec, adjoints, result_seed, bufs)

    def recorded(self, rec: Record, outs: Sequence[torch.Tensor]) -> bool:
        """Whether ``rec`` is the record of the forward that wrote the buffers ``outs``."""
        return all(rec.args[i] == b.data_ptr() for i, b in zip(self._out_arg_index, outs))

    def reads_seeds_only(self, rec: Record) -> bool:
        """Whether :meth:`run_sweep_reading_seeds` may run on ``rec``: the kernel has a
        generated sweep that only reads its seeds and adds into every input adjoint (the
        engine's proof, ``Derivative.assign_extents`` with no size parameter), and the int
        arguments that proof assumes non-negative are."""
        sig = self.k.sig
        ext = dict(getattr(sig, "assign_extents", ()) or ())
        inputs = [w for w in self.k.adjoints if w not in self.out_names]
        if not inputs or any(ext.get(w, None) != "" for w in inputs):
            return False
        if not self.k.module_has("reverse_sweep_assign", rec.scalar):
            return False
        params = self.k.params
        return all(rec.args[params.index(self.k.by_name[n])] >= 0
                   for n in getattr(sig, "assign_nonneg", ()) or ())

    def run_sweep_reading_seeds(self, rec: Record, adjoints: Sequence[torch.Tensor]) -> None:
        """:meth:`run_sweep` by ``f_reverse_sweep_assign`` (only where :meth:`reads_seeds_only`
        says so): it adds into the input adjoints like the sweep, and only reads the seeds --
        the caller's grads can go in as they are, uncopied."""
        self._sweep_call("reverse_sweep_assign", rec, adjoints, 0, None)

    def _sweep_call(self, kind: str, rec: Record, adjoints: Sequence[torch.Tensor],
                    result_seed: float, bufs: Mapping[str, torch.Tensor] | None) -> None:
        call = list(rec.args)
        if self.k.seeded:
            call.append(result_seed)
        call += [a.data_ptr() for a in adjoints]
        call.append(rec.tape)
        arrays = dict(rec.bufs if bufs is None else bufs)
        if self.debug:
            arrays.update({f"d:{w}": a for w, a in zip(self.k.adjoints, adjoints)})
        self._call(kind, rec.scalar, call, arrays, "the reverse sweep (generated)")

    def detach_outputs(self, rec: Record) -> None:
        """Drop the outputs from a record that outlives the call (attached to an output's
        storage, or held by an autograd node that the outputs point to): it must not own them,
        or the cycle through C++ would never be collected. The sweep gets them as arguments."""
        bufs = rec.bufs
        for n in self.out_names:
            bufs.pop(n, None)

    def sweep(self, ins, outs, grads, rec):
        """Input grads from ``grads`` (one per differentiable output, then the return value's),
        by the reverse sweep on the tape of ``rec`` (consumed) -- or, when there is no record or
        it is not the one of these outputs, on the tape of a fresh ``reverse_forw``."""
        if rec is not None:
            out_bufs = dict(zip(self.out_names, outs))
            if not self.recorded(rec, outs):
                rec = None  # not the buffers the forward wrote: recompute below
        kept: list[tuple[torch.Tensor, torch.Tensor]] = []
        if rec is not None:
            bufs = {**rec.bufs, **out_bufs}
            # The sweep may restore overwritten memory, outputs included, and must run on the
            # very buffers the forward used; those are the caller's tensors: keep their values
            # (unless the sweep never restores anything).
            if self.sweep_restores:
                kept = [(b, b.clone()) for b in out_bufs.values()]
        else:
            _, rec = self.run_forward(ins, record=True)
            bufs = rec.bufs
        adj, seeds = self.buffers.adjoints(bufs, outs, grads, self._out_dtypes[rec.scalar],
                                           rec.scalar)
        adjoints = [adj[w] for w in self.k.adjoints]
        self.run_sweep(rec, adjoints, grads[-1].item() if self.ret_diff else 0, bufs)
        self.buffers.give_back(seeds)
        for buf, values in kept:
            # A raw copy back: net unchanged, and the version counter (checked by autograd for
            # saved tensors) is not bumped.
            ctypes.memmove(buf.data_ptr(), values.data_ptr(), buf.numel() * buf.element_size())
        res = [adjoints[j] for j in self._res_adj_index]
        return res[0] if len(res) == 1 else tuple(res)
