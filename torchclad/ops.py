"""``torchclad.function``: a C++ kernel as a differentiable ``torch.library`` custom op.

::

    gelu = torchclad.function(src, "gelu_forward", inputs=["inp"],
                              outputs={"out": lambda inp: inp.shape},
                              sizes={"N": lambda inp: inp.numel()})
    y = gelu(x)                 # torch.ops.torchclad.gelu_forward_<hash>(x)

How the op is put together (split mode, DESIGN.md):

- ``torchclad::<op>(inputs...) -> outputs`` runs ``f_reverse_forw``, which records what the
  reverse sweep needs on a fresh ``Tape``. The tape, the call's arguments and the input buffers
  the forward ran on form a :class:`_Record`, attached to the storage of the op's first output
  (not owning the outputs: that would be a cycle through C++). It lives exactly as long as that
  output: nothing leaks when backward never runs, and no registry or extra output is needed, so
  ``opcheck`` and ``torch.compile`` see a plain op.
- The autograd formula saves inputs and outputs and calls ``torchclad::<op>_backward(inputs...,
  outputs..., grads...) -> input grads``, itself a custom op, so that a traced backward
  (torch.compile, opcheck) records it; plain eager backward calls its implementation directly,
  skipping a second dispatcher round trip. That implementation finds the record through the
  saved output, seeds the output adjoints with copies of the incoming grads (adjoints
  accumulate) and runs ``f_reverse_sweep`` only, on the very buffers of the forward; outputs the
  sweep restores are put back afterwards, since they are the caller's tensors.
- One sweep consumes a record. A second backward through the same graph (``retain_graph=True``,
  ``gradcheck``), or an output whose record is gone, recomputes the record from the saved inputs
  by running ``f_reverse_forw`` again: the gradient never depends on the record's bookkeeping.
- With grad mode on inside the op (the dispatcher's no-autograd path) or under
  ``torch.inference_mode()``, the plain forward ``f`` runs and nothing is recorded.
- Double backward raises: the backward op's own autograd formula refuses it.
- Calling the :class:`KernelOp` itself (what the ``torchclad.nn`` modules do) is the same op
  with a fast lane for plain eager autograd: there, the forward goes straight to a
  ``torch.autograd.Function`` running the same ``_run_forward`` / sweep code, the record held by
  the autograd node instead of the output's storage (the dispatcher round trip of a Python
  custom op costs about as much as a small kernel). Anything else -- ``torch.compile``, a
  dispatch mode (fake tensors, opcheck, FX), tensor subclasses, functorch transforms, tracing --
  takes the custom op. Without grad (no input requires it, or grad mode off) the lane runs the
  plain forward and records nothing.
- Per call the bridge re-derives nothing it has seen: the dtype checks, the output shapes
  (whose functions are the shape checks) and the shape-only sizes (``static_sizes``) are cached
  per call signature (each input's shape, dtype, device) in a :class:`_Plan`; a call that fails
  a check raises and caches nothing, and size functions that read values (index checks) run on
  every call. The record of the fast lane, held by the autograd node, does not hold the outputs
  either (they point to the node): a forward whose backward never runs frees everything.
- The sweep's copies are only what it needs: a reverse sweep that never restores memory from
  the tape (``torchclad.build.signature.sweep_restores``, the case of every built-in kernel)
  leaves the forward's outputs alone, so they are not copied around it; ``zero_outputs=False``
  (built-in kernels, which write every element of their outputs) allocates outputs without
  zero-filling them.
"""

from __future__ import annotations

import ctypes
import hashlib
import keyword
import threading
from typing import Any, Callable, Mapping, Sequence

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode as _current_dispatch_mode

from torchclad._kernel import BASE_DTYPE, SCALAR_OF_DTYPE, Kernel
from torchclad.build.signature import sweep_restores

__all__ = ["function", "KernelOp", "kernel_op", "make_op"]

_NAMESPACE = "torchclad"
_RECORD_ATTR = "_torchclad_record"
_ops_lock = threading.Lock()
_ops: dict[str, "KernelOp"] = {}


def function(
    source: str,
    name: str,
    *,
    inputs: Sequence[str],
    outputs: Mapping[str, Callable[..., Any]],
    sizes: Mapping[str, Callable[..., Any]] | None = None,
):
    """Differentiate ``name`` in the C++ ``source``, compile it and wrap it as a custom op.

    - ``inputs``: pointer parameters read from tensors, in the op's argument order.
    - ``outputs``: ``{param: shape_fn}`` for the pointer parameters the kernel writes; the op
      returns them in this order (one tensor, or a tuple). A parameter that is also in
      ``inputs`` is updated in place on a copy of the input. A non-void kernel's floating
      return value is returned last, as a 0-dim tensor.
    - ``sizes``: ``{param: fn}`` for the scalar parameters (``int N``, also a constant float).

    Every function receives the input tensors positionally. Templates give float32 and
    float64 from one source; CPU tensors only; non-contiguous inputs are accepted.
    Returns the ``torch.library`` custom op (a ``CustomOpDef``; call it like a function).
    """
    from torchclad import ad, build

    if isinstance(inputs, str):  # "a, b" like Clad's argument strings
        inputs = [n.strip() for n in inputs.split(",") if n.strip()]
    if not isinstance(outputs, Mapping) or (sizes is not None and not isinstance(sizes, Mapping)):
        raise TypeError("outputs and sizes must be dicts {param: fn}, e.g. "
                        "outputs={'out': lambda x: x.shape}, sizes={'N': lambda x: x.numel()}")
    sizes = dict(sizes or {})
    deriv = ad.differentiate(source, name, None)
    spec_text = repr((source, name, tuple(inputs), tuple(outputs), tuple(sizes)))
    digest = hashlib.sha256(spec_text.encode()).hexdigest()[:10]
    kernel = Kernel(deriv, build.load(deriv))
    return make_op(kernel, f"{_ident(name)}_{digest}", inputs=inputs, outputs=outputs, sizes=sizes).op


def make_op(
    kernel: Kernel,
    opname: str,
    *,
    inputs: Sequence[str],
    outputs: Mapping[str, Callable[..., Any]],
    sizes: Mapping[str, Callable[..., Any]] | None = None,
    zero_outputs: bool = True,
    static_sizes: Sequence[str] = (),
) -> "KernelOp":
    """The :class:`KernelOp` ``torchclad::<opname>``; reused if the same spec made it before.

    ``zero_outputs=False``: the kernel writes every element of each output (so they need not be
    zero-filled before it runs). ``static_sizes``: the size parameters whose functions depend on
    the inputs' shapes and dtypes only (no value checks): their values are cached per call
    signature with the output shapes, instead of being recomputed on every call."""
    with _ops_lock:
        base, n = opname, 1
        while opname in _ops:
            old = _ops[opname]
            if (old.same_spec(kernel, inputs, outputs, sizes or {})
                    and old.zero_outputs == zero_outputs
                    and old.static_sizes == frozenset(static_sizes)):
                return old
            n += 1
            opname = f"{base}_{n}"
        op = KernelOp(kernel, opname, inputs=inputs, outputs=outputs, sizes=sizes or {},
                      zero_outputs=zero_outputs, static_sizes=static_sizes)
        _ops[opname] = op
        return op


def kernel_op(op: Any) -> "KernelOp":
    """The :class:`KernelOp` behind a custom op made here (``CustomOpDef`` or its name)."""
    name = op if isinstance(op, str) else getattr(op, "_name", None)
    if isinstance(name, str) and name.startswith(f"{_NAMESPACE}::"):
        name = name.split("::", 1)[1]
    try:
        return _ops[name]
    except KeyError:
        raise KeyError(f"{op!r} is not an op made by torchclad.function") from None


def _ident(s: str) -> str:
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in s)
    return out if out and not out[0].isdigit() else "k_" + out


def _arg_name(s: str) -> str:
    return s + "_" if keyword.iskeyword(s) or s in ("self", "out") else s


class _Plan:
    """What the checks and shape functions of one call signature found (KernelOp._plan): the
    scalar type, the outputs to allocate ``(name, shape, dtype)``, the kernel's argument list
    with the static sizes filled in, where the pointers (``(index, buffer name)``) and the other
    sizes (``(index, fn, converter)``) go, the dtype of the return value."""

    __slots__ = ("scalar", "outs", "args", "ptr", "dyn", "ret_dtype")

    def __init__(self, scalar, outs, args, ptr, dyn, ret_dtype):
        self.scalar, self.outs, self.args, self.ptr, self.dyn = scalar, outs, args, ptr, dyn
        self.ret_dtype = ret_dtype


class _Record:
    """What one forward left for its reverse sweep: the tape and the buffers it ran on."""

    __slots__ = ("tape", "args", "bufs", "scalar", "__weakref__")

    def __init__(self, tape: Any, args: list, bufs: dict, scalar: str):
        self.tape, self.args, self.bufs, self.scalar = tape, args, bufs, scalar


class KernelOp:
    """A kernel bound as ``torchclad::<opname>`` (forward) + ``<opname>_backward``."""

    def __init__(self, kernel: Kernel, opname: str, *, inputs, outputs, sizes,
                 zero_outputs: bool = True, static_sizes: Sequence[str] = ()):
        self.k = k = kernel
        self.opname = opname
        self.inputs = tuple(inputs)
        self.outputs = dict(outputs)
        self.sizes = dict(sizes)
        self.zero_outputs = bool(zero_outputs)
        self.static_sizes = frozenset(static_sizes)
        self._check_spec()
        unknown = self.static_sizes - set(self.sizes)
        if unknown:
            raise ValueError(f"static_sizes: {sorted(unknown)} are not in sizes")
        # May the reverse sweep write the forward's memory (restore from the tape)? A built-in
        # kernel's signature says (recorded at build time); a Derivative is checked here.
        restores = getattr(k.sig, "restores", None)
        self._sweep_restores = (sweep_restores(k.sig) if restores is None else bool(restores))
        self.out_names = tuple(self.outputs)
        self.has_ret = k.ret is not None
        self.n_out = len(self.out_names) + self.has_ret
        # Differentiable inputs (floating, with an adjoint) and outputs (floating), by position.
        self.diff_in = [i for i, n in enumerate(self.inputs)
                        if k.is_float(k.by_name[n]) and n in k.adjoints]
        self.diff_out = [i for i, n in enumerate(self.out_names) if k.is_float(k.by_name[n])]
        self.ret_diff = self.has_ret and k.is_float(k.ret)
        # Precomputed for the per-call path.
        self._first_template_input = next(
            (i for i, n in enumerate(self.inputs) if k.by_name[n].base in k.template), None)
        self._default_scalar = None if k.template else k.default_scalar()
        self._expected_dtypes = {
            s: tuple(k.dtype_of(k.by_name[n], s) for n in self.inputs)
            for s in (k.scalars() if k.template else (self._default_scalar,))}
        self._out_arg_index = tuple(k.params.index(k.by_name[n]) for n in self.out_names)
        self._diff_in_names = frozenset(self.inputs[i] for i in self.diff_in)
        self._in_copy = tuple(not (k.by_name[n].const and n not in self.outputs)
                              for n in self.inputs)
        self._out_dtypes = {s: tuple(k.dtype_of(k.by_name[n], s) for n in self.out_names)
                            for s in self._expected_dtypes}
        self._arg_plan = tuple(
            (True, p.name, None, None) if p.pointer
            else (False, p.name, self.sizes[p.name], self._converter(p)) for p in k.params)
        self._scratch = _Scratch()
        # Per call signature (the inputs' shapes and dtypes, see _plan_key): what the checks and
        # shape functions found, so a repeated call does not re-derive it (_plan).
        self._plans: dict[tuple, _Plan] = {}
        # The sweep's adjoint arguments (name, is an array), and where the input grads are.
        # Some output is not floating (for some scalar type): marked non-differentiable.
        self._frozen_outputs = any(d not in (torch.float32, torch.float64)
                                   for ds in self._out_dtypes.values() for d in ds) or (
            self.has_ret and not k.is_float(k.ret))
        # Input adjoints may start from the seeds of earlier sweeps, which the sweep zeroed as it
        # read them (_Scratch): for kernels that write every element of their outputs (each
        # write's reverse reads and zeroes that element's adjoint), checked once per seed shape
        # (_seed_zeroed); any seed found not all zero turns this off for the op.
        self._zero_pool = not self.zero_outputs
        self._seed_names = frozenset(self.out_names[i] for i in self.diff_out)
        self._zero_checked: set = set()
        self._adj_plan = tuple((w, bool(k.by_name[w].pointer)) for w in k.adjoints)
        self._res_adj_index = tuple(k.adjoints.index(self.inputs[i]) for i in self.diff_in)
        self._define()
        self._function = self._make_function()

    def same_spec(self, kernel, inputs, outputs, sizes) -> bool:
        return (kernel.sig == self.k.sig and tuple(inputs) == self.inputs
                and dict(outputs) == self.outputs and dict(sizes) == self.sizes)

    # ---- validation of the spec against the signature

    def _check_spec(self) -> None:
        k = self.k
        sig = f"{k.name}({', '.join(p.name for p in k.params)})"
        for group, names in (("inputs", self.inputs), ("outputs", tuple(self.outputs)),
                             ("sizes", tuple(self.sizes))):
            for n in names:
                if n not in k.by_name:
                    raise ValueError(f"{group}: {n!r} is not a parameter of {sig}")
        if len(set(self.inputs)) != len(self.inputs):
            raise ValueError(f"inputs: a parameter is listed twice in {list(self.inputs)}")
        for n in self.inputs:
            if not k.by_name[n].pointer:
                raise ValueError(f"inputs: {n!r} of {sig} is a scalar; give scalars in sizes={{{n!r}: fn}}")
        for n, fn in self.outputs.items():
            p = k.by_name[n]
            if not p.pointer or p.const:
                what = "a scalar" if not p.pointer else "a const pointer (read-only)"
                raise ValueError(f"outputs: {n!r} of {sig} is {what}; "
                                 "outputs are the arrays the kernel writes")
            if not callable(fn):
                raise TypeError(f"outputs[{n!r}] must be a function of the inputs returning a shape")
        for n, fn in self.sizes.items():
            if k.by_name[n].pointer:
                raise ValueError(f"sizes: {n!r} of {sig} is a pointer; list arrays in inputs or outputs")
            if not callable(fn):
                raise TypeError(f"sizes[{n!r}] must be a function of the inputs")
        for p in k.params:
            if p.pointer and p.name not in self.inputs and p.name not in self.outputs:
                raise ValueError(f"{sig}: pointer parameter {p.name!r} is in neither inputs nor outputs")
            if not p.pointer and p.name not in self.sizes:
                raise ValueError(
                    f"{sig}: scalar parameter {p.name!r} has no value; add "
                    f"sizes={{{p.name!r}: lambda *inputs: ...}}"
                )
        for n in self.outputs:
            if k.is_float(k.by_name[n]) and n not in k.adjoints:
                raise ValueError(
                    f"{sig}: output {n!r} has no adjoint in the generated pullback "
                    f"(adjoints: {list(k.adjoints)}); "
                    "outputs must be differentiated to be seeded"
                )
        if not self.outputs and k.ret is None:
            raise ValueError(f"{sig}: a void kernel needs at least one entry in outputs")

    # ---- the forward

    def _output_dtype(self, n: str, scalar: str) -> torch.dtype:
        return self.k.dtype_of(self.k.by_name[n], scalar)

    def _scalar(self, ins: Sequence[torch.Tensor]) -> str:
        """The scalar type (float/double) of this call; checks every input's dtype and device."""
        # Fast path for well-formed calls; anything odd goes to the checks that explain it.
        try:
            first = self._first_template_input
            scalar = (SCALAR_OF_DTYPE.get(ins[first].dtype) if first is not None
                      else self._default_scalar)
            expect = self._expected_dtypes.get(scalar)
            if expect is not None and all(t.dtype == d and t.is_cpu
                                          for t, d in zip(ins, expect)):
                return scalar
        except AttributeError:
            pass
        return self._scalar_checked(ins)

    def _scalar_checked(self, ins: Sequence[torch.Tensor]) -> str:
        k = self.k
        for n, t in zip(self.inputs, ins):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{self.opname}: input '{n}' must be a tensor, got {type(t).__name__}")
        scalar = k.pick_scalar(dict(zip(self.inputs, ins)), what="input")
        for n, t in zip(self.inputs, ins):
            k.check_tensor(k.by_name[n], t, scalar, what="input")
        return scalar

    def _shape(self, n: str, ins: Sequence[torch.Tensor]):
        if n in self.inputs:
            return ins[self.inputs.index(n)].shape
        s = self.outputs[n](*ins)
        return (s,) if isinstance(s, int) or isinstance(s, torch.SymInt) else tuple(s)

    def _fake(self, *ins):
        scalar = self._scalar(ins)
        outs = [torch.empty(self._shape(n, ins), dtype=self._output_dtype(n, scalar))
                for n in self.out_names]
        if self.has_ret:
            outs.append(torch.empty((), dtype=self.k.dtype_of(self.k.ret, scalar)))
        return outs[0] if len(outs) == 1 else tuple(outs)

    _MAX_PLANS = 64

    @staticmethod
    def _plan_key(ins: Sequence[Any]):
        """The call signature a :class:`_Plan` is valid for: each input's shape, dtype and
        whether it is on the CPU (None if an input is not a tensor: the checks will say)."""
        try:
            return tuple([(t.shape, t.dtype, t.is_cpu) for t in ins])
        except AttributeError:
            return None

    def _plan(self, ins: Sequence[torch.Tensor]) -> "_Plan":
        """The :class:`_Plan` of this call: cached per call signature. Making one runs every
        check (dtypes, devices, the shape functions); a call that fails them raises and leaves
        nothing cached, so a bad call always raises."""
        key = self._plan_key(ins)
        plan = self._plans.get(key) if key is not None else None
        if plan is not None:
            return plan
        k = self.k
        scalar = self._scalar(ins)
        outs = tuple((n, tuple(self._shape(n, ins)), dtype)
                     for n, dtype in zip(self.out_names, self._out_dtypes[scalar])
                     if n not in self.inputs)
        args: list[Any] = []
        ptr, dyn = [], []
        for i, (pointer, name, fn, conv) in enumerate(self._arg_plan):
            if pointer:
                args.append(None)
                ptr.append((i, name))
            elif name in self.static_sizes:
                v = fn(*ins)
                args.append(conv(v.item() if isinstance(v, torch.Tensor) else v))
            else:
                args.append(None)
                dyn.append((i, fn, conv))
        plan = _Plan(scalar, outs, args, tuple(ptr), tuple(dyn),
                     None if not self.has_ret else k.dtype_of(k.ret, scalar))
        if key is not None:
            if len(self._plans) >= self._MAX_PLANS:
                self._plans.clear()
            self._plans[key] = plan
        return plan

    def _run_forward(self, ins: Sequence[torch.Tensor], record: bool):
        """Run the kernel; returns (outputs, _Record or None)."""
        k = self.k
        plan = self._plan(ins)
        scalar = plan.scalar
        bufs: dict[str, torch.Tensor] = {}
        # (no autograd graph is recorded here: the fast lane's Function.forward and the op's
        # implementation run without it, so the inputs need no detach)
        for n, t, copy in zip(self.inputs, ins, self._in_copy):
            # a const input is read in place; one the kernel may write is worked on as a copy
            bufs[n] = t.clone(memory_format=torch.contiguous_format) if copy else t.contiguous()
        alloc = torch.zeros if self.zero_outputs else torch.empty
        for n, shape, dtype in plan.outs:
            bufs[n] = alloc(shape, dtype=dtype)
        args = plan.args.copy()
        for i, name in plan.ptr:
            args[i] = bufs[name].data_ptr()
        for i, fn, conv in plan.dyn:
            v = fn(*ins)
            args[i] = conv(v.item() if isinstance(v, torch.Tensor) else v)
        rec = None
        if record:
            tape = k.new_tape()
            ret = k.binding("reverse_forw", scalar)(*args, tape)
            rec = _Record(tape, args, bufs, scalar)
        else:
            ret = k.binding("", scalar)(*args)
        outs = [bufs[n] for n in self.out_names]
        if self.has_ret:
            outs.append(torch.full((), ret, dtype=plan.ret_dtype))
        return outs, rec

    def _detach_outputs(self, rec: "_Record") -> None:
        """Drop the outputs from a record that outlives the call (attached to an output's
        storage, or held by an autograd node that the outputs point to): it must not own them,
        or the cycle through C++ would never be collected. The sweep gets them as arguments."""
        bufs = rec.bufs
        for n in self.out_names:
            bufs.pop(n, None)

    def _converter(self, p: Any) -> Callable[[Any], Any]:
        """The Python value a scalar parameter is passed as (an int checked against its type)."""
        k = self.k
        if k.is_float(p):
            return float
        if p.base == "bool":
            return bool
        info = torch.iinfo(BASE_DTYPE[p.base])
        lo, hi = info.min, info.max
        if "unsigned" in p.base or "uint" in p.base or "size_t" in p.base:
            lo, hi = 0, 2 * hi + 1

        def conv(v):
            v = int(v)
            if not lo <= v <= hi:
                raise ValueError(
                    f"{k.name}: sizes[{p.name!r}] = {v} does not fit the parameter's type "
                    f"{p.base} ([{lo}, {hi}])"
                )
            return v
        return conv

    def _impl(self, *ins):
        # Inside the autograd formula's forward grad mode is off; grad mode on here means the
        # dispatcher took the no-autograd path, so nothing will ever need a tape.
        record = not torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
        outs, rec = self._run_forward(ins, record)
        if rec is not None:
            # The output's storage owns the record (see _detach_outputs).
            self._detach_outputs(rec)
            setattr(outs[0].untyped_storage(), _RECORD_ATTR, rec)
        return outs[0] if len(outs) == 1 else tuple(outs)

    # ---- the backward

    def _backward_impl(self, *args):
        n_in, n_out = len(self.inputs), self.n_out
        ins, outs, grads = args[:n_in], args[n_in:n_in + n_out], args[n_in + n_out:]
        storage = outs[0].untyped_storage()
        rec = getattr(storage, _RECORD_ATTR, None)
        if rec is not None:
            delattr(storage, _RECORD_ATTR)  # one sweep consumes a tape
        return self._sweep(ins, outs, grads, rec)

    def _sweep(self, ins, outs, grads, rec):
        """Input grads from ``grads`` (one per differentiable output, then the return value's),
        by the reverse sweep on the tape of ``rec`` (consumed) -- or, when there is no record or
        it is not the one of these outputs, on the tape of a fresh ``reverse_forw``."""
        k = self.k
        if rec is not None:
            out_bufs = dict(zip(self.out_names, outs))
            if any(rec.args[i] != b.data_ptr() for i, b in zip(self._out_arg_index, outs)):
                rec = None  # not the buffers the forward wrote: recompute below
        kept: list[tuple[torch.Tensor, torch.Tensor]] = []
        if rec is not None:
            bufs = {**rec.bufs, **out_bufs}
            # The sweep may restore overwritten memory, outputs included, and must run on the
            # very buffers the forward used; those are the caller's tensors: keep their values
            # (unless the sweep never restores anything).
            if self._sweep_restores:
                kept = [(b, b.clone()) for b in out_bufs.values()]
        else:
            _, rec = self._run_forward(ins, record=True)
            bufs = rec.bufs
        scalar = rec.scalar
        # Seeds: copies of the incoming grads (the sweep zeroes what it reads), in scratch buffers
        # reused from call to call -- unless the seed is also an input's gradient (an output
        # that is an input too), which is handed out. A grad that is None seeds zeros.
        out_dtypes = self._out_dtypes[scalar]
        # The input adjoints first: zero-filled (the sweep accumulates into them), taken first
        # from the zero pool of earlier seeds (_Scratch), so that the seeds do not use it up.
        adj: dict[str, torch.Tensor] = {}
        for w, pointer in self._adj_plan:
            if w in self._seed_names:
                continue
            if pointer:
                b = bufs[w]
                adj[w] = (self._scratch.take_zeroed(b.shape, b.dtype) if self._zero_pool
                          else torch.zeros_like(b, memory_format=torch.contiguous_format))
            else:
                adj[w] = torch.zeros((), dtype=k.dtype_of(k.by_name[w], scalar))
        scratch: list[torch.Tensor] = []
        for i, g in zip(self.diff_out, grads):
            n = self.out_names[i]
            if n in self._diff_in_names:
                adj[n] = (torch.zeros_like(outs[i]) if g is None else
                          g.to(out_dtypes[i]).clone(memory_format=torch.contiguous_format))
                continue
            buf = self._scratch.take(outs[i].shape, out_dtypes[i])
            if g is None:
                buf.zero_()
            else:
                buf.copy_(g)
            adj[n] = buf
            scratch.append(buf)
        call = list(rec.args)
        if self.has_ret:
            call.append(grads[-1].item() if self.ret_diff else 0)
        adjoints = [adj[w] for w in k.adjoints]
        call += [a.data_ptr() for a in adjoints]
        call.append(rec.tape)
        k.binding("reverse_sweep", scalar)(*call)
        for buf in scratch:
            self._scratch.give(buf, self._zero_pool and self._seed_zeroed(buf))
        for buf, values in kept:
            # A raw copy back: net unchanged, and the version counter (checked by autograd for
            # saved tensors) is not bumped.
            ctypes.memmove(buf.data_ptr(), values.data_ptr(), buf.numel() * buf.element_size())
        res = [adjoints[j] for j in self._res_adj_index]
        return res[0] if len(res) == 1 else tuple(res)

    def _seed_zeroed(self, buf: torch.Tensor) -> bool:
        """Whether a seed the sweep just consumed is all zero: checked on the first seed of each
        (shape, dtype); a failed check turns the zero pool off for this op."""
        key = (tuple(buf.shape), buf.dtype)
        if key in self._zero_checked:
            return True
        if bool(buf.any()):
            self._zero_pool = False
            return False
        self._zero_checked.add(key)
        return True

    def _backward_fake(self, *args):
        ins = args[:len(self.inputs)]
        res = [torch.empty_like(ins[i], memory_format=torch.contiguous_format) for i in self.diff_in]
        return res[0] if len(res) == 1 else tuple(res)

    # ---- registration

    def _define(self) -> None:
        in_names = [_arg_name(n) for n in self.inputs]
        rets = ["Tensor"] * self.n_out
        schema = f"({', '.join('Tensor ' + n for n in in_names)}) -> " + (
            rets[0] if len(rets) == 1 else f"({', '.join(rets)})")
        qual = f"{_NAMESPACE}::{self.opname}"
        self.op = torch.library.custom_op(qual, mutates_args=(), schema=schema)(self._impl)
        self.op.register_fake(self._fake)

        if not self.diff_in:
            return
        n_g = len(self.diff_out) + self.ret_diff
        bargs = ([f"Tensor i{j}" for j in range(len(self.inputs))]
                 + [f"Tensor o{j}" for j in range(self.n_out)]
                 + [f"Tensor g{j}" for j in range(n_g)])
        brets = ["Tensor"] * len(self.diff_in)
        bschema = f"({', '.join(bargs)}) -> " + (brets[0] if len(brets) == 1 else f"({', '.join(brets)})")
        self.backward_op = torch.library.custom_op(
            f"{qual}_backward", mutates_args=(), schema=bschema)(self._backward_impl)
        self.backward_op.register_fake(self._backward_fake)
        self.backward_op.register_autograd(_refuse_double_backward(self.opname),
                                           setup_context=_no_context)
        self.op.register_autograd(self._autograd_backward, setup_context=self._setup_context)

    def _setup_context(self, ctx, inputs, output):
        outs = output if isinstance(output, tuple) else (output,)
        ctx.save_for_backward(*inputs, *outs)

    def _autograd_backward(self, ctx, *grads):
        saved = ctx.saved_tensors
        n_in = len(self.inputs)
        ins, outs = saved[:n_in], saved[n_in:]
        gs = [grads[i] if grads[i] is not None else torch.zeros_like(outs[i]) for i in self.diff_out]
        if self.ret_diff:
            gs.append(grads[-1] if grads[-1] is not None else torch.zeros_like(outs[-1]))
        if _plain_eager(saved, gs):
            # Same code the backward op runs, without a second trip through the dispatcher.
            res = self._backward_impl(*ins, *outs, *gs)
        else:  # tracing (torch.compile, opcheck) or create_graph=True: a real op in the graph
            res = self.backward_op(*ins, *outs, *gs)
        res = res if isinstance(res, tuple) else (res,)
        full: list[Any] = [None] * n_in
        for i, g in zip(self.diff_in, res):
            full[i] = g
        return full[0] if n_in == 1 else tuple(full)

    # ---- the eager fast lane (see the module docstring)

    def __call__(self, *ins):
        """``self.op(*ins)``, by the fast lane when that is plain eager autograd."""
        if torch.compiler.is_compiling() or not _plain_call(ins):
            return self.op(*ins)
        if not (torch.is_grad_enabled() and any(t.requires_grad for t in ins)):
            outs, _ = self._run_forward(ins, record=False)
            return outs[0] if len(outs) == 1 else tuple(outs)
        return self._function.apply(*ins)

    def _make_function(self):
        kop = self
        n_in = len(self.inputs)
        floating = (torch.float32, torch.float64)

        class Function(torch.autograd.Function):
            @staticmethod
            def forward(ctx, *ins):
                outs, rec = kop._run_forward(ins, record=True)
                ctx.set_materialize_grads(False)  # a grad that is None seeds zeros in _sweep
                # The node holds the record and the outputs point to the node: the record must
                # not hold them (a forward whose backward never runs would leak them through the
                # cycle); backward gets them from the saved tensors.
                kop._detach_outputs(rec)
                ctx.torchclad_record = rec
                ctx.save_for_backward(*ins, *outs)
                if kop._frozen_outputs:
                    frozen = [o for o in outs if o.dtype not in floating]
                    if frozen:
                        ctx.mark_non_differentiable(*frozen)
                return outs[0] if len(outs) == 1 else tuple(outs)

            @staticmethod
            def backward(ctx, *grads):
                saved = ctx.saved_tensors
                ins, outs = saved[:n_in], saved[n_in:]
                gs = [grads[i] for i in kop.diff_out]
                if kop.ret_diff:
                    gs.append(grads[-1] if grads[-1] is not None else torch.zeros_like(outs[-1]))
                rec, ctx.torchclad_record = ctx.torchclad_record, None  # one sweep per tape
                if torch.is_grad_enabled():  # create_graph=True: the op that refuses to go on
                    gs = [g if g is not None else torch.zeros_like(outs[i])
                          for i, g in zip(kop.diff_out, gs)] + gs[len(kop.diff_out):]
                    res = kop.backward_op(*ins, *outs, *gs)
                else:
                    res = kop._sweep(ins, outs, gs, rec)
                res = res if isinstance(res, tuple) else (res,)
                full: list[Any] = [None] * n_in
                for i, g in zip(kop.diff_in, res):
                    full[i] = g
                return tuple(full)

        Function.__name__ = Function.__qualname__ = f"torchclad_{self.opname}"
        return Function

    def __repr__(self) -> str:
        return f"<torchclad op {_NAMESPACE}::{self.opname} ({self.k.name})>"


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _plain_eager(*groups) -> bool:
    """Eager autograd on ordinary tensors, with no graph to record (create_graph=False)."""
    if torch.is_grad_enabled() or _current_dispatch_mode() is not None:
        return False
    if torch.compiler.is_compiling():
        return False
    return all(type(t) in _PLAIN for g in groups for t in g)


class _Scratch:
    """Reusable seed buffers of one op's reverse sweeps: a few per (shape, dtype), most recently
    used kept. A sweep zeroes its seeds as it reads them, so they are scratch once it returns;
    reusing them spares an allocation (and, for large ones, the page faults of fresh memory:
    glibc returns freed heap tops to the OS) per backward.

    Seeds that came back all zero (checked, see ``KernelOp._seed_zeroed``) are kept apart: an
    input adjoint of the same shape starts from one of them (the sweep accumulates into it)
    instead of from a fresh zero-filled buffer -- a memory pass fewer per backward."""

    _PER_KEY = 2
    _KEYS = 4

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.free: dict[tuple, list[torch.Tensor]] = {}
        self.zero: dict[tuple, list[torch.Tensor]] = {}

    def take(self, shape, dtype) -> torch.Tensor:
        """A buffer of any content."""
        key = (tuple(shape), dtype)
        with self.lock:
            free = self.free.get(key) or self.zero.get(key)
            if free:
                return free.pop()
        return torch.empty(key[0], dtype=dtype)

    def take_zeroed(self, shape, dtype) -> torch.Tensor:
        """A zero-filled buffer (from the zero pool, else a fresh one)."""
        key = (tuple(shape), dtype)
        with self.lock:
            zero = self.zero.get(key)
            if zero:
                return zero.pop()
        return torch.zeros(key[0], dtype=dtype)

    def give(self, buf: torch.Tensor, zeroed: bool = False) -> None:
        key = (tuple(buf.shape), buf.dtype)
        pool = self.zero if zeroed else self.free
        with self.lock:
            free = pool.get(key)
            if free is None:
                free = pool[key] = []
                while len(pool) > self._KEYS:
                    del pool[next(iter(pool))]
            if len(free) < self._PER_KEY:
                free.append(buf)


def _plain_call(ins) -> bool:
    """A call the fast lane may take: ordinary CPU tensors, no dispatch mode, no functorch
    transform, no tracing (the checks of the op itself -- dtypes, shapes -- still run)."""
    if _current_dispatch_mode() is not None or torch._C._are_functorch_transforms_active():
        return False
    if torch.jit.is_tracing():
        return False
    return all(type(t) in _PLAIN for t in ins)


def _no_context(ctx, inputs, output) -> None:
    pass


def _refuse_double_backward(opname: str):
    def backward(ctx, *grads):
        raise RuntimeError(
            f"torchclad::{opname}: double backward (a gradient of the gradient) is not supported: "
            "the engine generates first-order reverse mode only. Use create_graph=False, or "
            "torch.func / a torch implementation for higher-order derivatives."
        )
    return backward
