"""What a :class:`~torchclad.bridge.op.KernelOp` works out per call, and what a forward leaves.

Per call the bridge re-derives nothing it has seen: the dtype checks, the output shapes (whose
functions are the shape checks) and the shape-only sizes (``static_sizes``) are cached per call
signature (each input's shape, dtype, device) in a :class:`Plan`; a call that fails a check
raises and caches nothing, and size functions that read values (index checks) run on every
call. A recording forward leaves a :class:`Record` for its reverse sweep.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from torchclad.bridge.kernel import BASE_DTYPE, SCALAR_OF_DTYPE, Kernel


def _item(pos: int) -> Callable:
    """The value of a scalar input: the 0-dim tensor at ``pos`` (read as a Python number)."""
    def value(*ins):
        return ins[pos]
    return value


class Plan:
    """What the checks and shape functions of one call signature found (:meth:`Planner.plan`):
    the scalar type, the outputs to allocate ``(name, shape, dtype)``, the kernel's argument
    list with the static sizes filled in, where the pointers (``(index, buffer name)``) and the
    other sizes (``(index, fn, converter)``) go, the dtype of the return value."""

    __slots__ = ("scalar", "outs", "args", "ptr", "dyn", "ret_dtype")

    def __init__(self, scalar, outs, args, ptr, dyn, ret_dtype):
        self.scalar, self.outs, self.args, self.ptr, self.dyn = scalar, outs, args, ptr, dyn
        self.ret_dtype = ret_dtype


class Record:
    """What one forward left for its reverse sweep: the tape, the kernel's arguments and the
    buffers it ran on (by parameter name), the scalar type."""

    __slots__ = ("tape", "args", "bufs", "scalar", "__weakref__")

    def __init__(self, tape: Any, args: list, bufs: dict, scalar: str):
        self.tape, self.args, self.bufs, self.scalar = tape, args, bufs, scalar


class Planner:
    """The checks of one op's calls and their :class:`Plan` per call signature.

    ``inputs``: the parameters read from tensors, in the op's argument order (arrays, and
    floating scalars as 0-dim tensors); ``outputs``: ``{param: shape_fn}``; ``sizes``:
    ``{param: fn}`` for the other scalar parameters, of which ``static_sizes`` depend on the
    inputs' shapes and dtypes only; ``contract``: a shape contract
    (:class:`~torchclad.bridge.spec.Contract`) checked first on each new call signature."""

    MAX_PLANS = 64

    def __init__(self, opname: str, kernel: Kernel, inputs: tuple, outputs: dict, sizes: dict,
                 static_sizes: frozenset, contract: Any = None):
        self.opname = opname
        self.k = k = kernel
        self.inputs, self.outputs, self.sizes = inputs, outputs, sizes
        self.static_sizes = static_sizes
        self.contract = contract or None
        self._scalar_inputs = tuple((i, n) for i, n in enumerate(inputs)
                                    if not k.by_name[n].pointer)
        self.out_names = tuple(outputs)
        self._first_template_input = next(
            (i for i, n in enumerate(inputs) if k.by_name[n].base in k.template), None)
        self._default_scalar = None if k.template else k.default_scalar()
        self._expected_dtypes = {
            s: tuple(k.dtype_of(k.by_name[n], s) for n in inputs)
            for s in (k.scalars() if k.template else (self._default_scalar,))}
        #: {scalar type: the dtype of each output}, for every scalar type the op runs with
        self.out_dtypes = {s: tuple(k.dtype_of(k.by_name[n], s) for n in self.out_names)
                           for s in self._expected_dtypes}
        self._arg_plan = tuple(
            (True, p.name, None, None) if p.pointer
            else (False, p.name, sizes[p.name] if p.name in sizes else _item(inputs.index(p.name)),
                  self.converter(p)) for p in k.params)
        self._plans: dict[tuple, Plan] = {}

    def scalar(self, ins: Sequence[torch.Tensor]) -> str:
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

    def shape(self, n: str, ins: Sequence[torch.Tensor]):
        """The shape of output ``n`` for these inputs (its shape function is its shape check)."""
        if n in self.inputs:
            return ins[self.inputs.index(n)].shape
        s = self.outputs[n](*ins)
        return (s,) if isinstance(s, int) or isinstance(s, torch.SymInt) else tuple(s)

    def check_shapes(self, ins: Sequence[torch.Tensor]) -> None:
        """The shape checks that need no shape function: the contract, 0-dim scalar inputs."""
        for i, n in self._scalar_inputs:
            if ins[i].dim() != 0:
                p = self.k.by_name[n]
                raise ValueError(f"{self.opname}: input '{n}' is the scalar parameter {p.base} "
                                 f"{n}: pass a 0-dim tensor (torch.tensor(value)), got shape "
                                 f"{tuple(ins[i].shape)}")
        if self.contract is not None:
            self.contract.bind(ins)

    def fake_outputs(self, ins: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Empty tensors shaped like the outputs (the return value last): the fake kernel."""
        k = self.k
        scalar = self.scalar(ins)
        self.check_shapes(ins)
        outs = [torch.empty(self.shape(n, ins), dtype=k.dtype_of(k.by_name[n], scalar))
                for n in self.out_names]
        if k.ret is not None:
            outs.append(torch.empty((), dtype=k.dtype_of(k.ret, scalar)))
        return outs

    @staticmethod
    def _plan_key(ins: Sequence[Any]):
        """The call signature a :class:`Plan` is valid for: each input's shape, dtype and
        whether it is on the CPU (None if an input is not a tensor: the checks will say)."""
        try:
            return tuple([(t.shape, t.dtype, t.is_cpu) for t in ins])
        except AttributeError:
            return None

    def plan(self, ins: Sequence[torch.Tensor]) -> Plan:
        """The :class:`Plan` of this call: cached per call signature. Making one runs every
        check (dtypes, devices, the shape functions); a call that fails them raises and leaves
        nothing cached, so a bad call always raises."""
        key = self._plan_key(ins)
        plan = self._plans.get(key) if key is not None else None
        if plan is not None:
            return plan
        k = self.k
        scalar = self.scalar(ins)
        self.check_shapes(ins)
        outs = tuple((n, tuple(self.shape(n, ins)), dtype)
                     for n, dtype in zip(self.out_names, self.out_dtypes[scalar])
                     if n not in self.inputs)
        args: list[Any] = []
        ptr, dyn = [], []
        for i, (pointer, name, fn, conv) in enumerate(self._arg_plan):
            if pointer:
                args.append(None)
                ptr.append((i, name))
            elif name in self.static_sizes and name not in self.inputs:
                v = fn(*ins)
                args.append(conv(v.item() if isinstance(v, torch.Tensor) else v))
            else:
                args.append(None)
                dyn.append((i, fn, conv))
        plan = Plan(scalar, outs, args, tuple(ptr), tuple(dyn),
                    None if k.ret is None else k.dtype_of(k.ret, scalar))
        if key is not None:
            if len(self._plans) >= self.MAX_PLANS:
                self._plans.clear()
            self._plans[key] = plan
        return plan

    def converter(self, p: Any) -> Callable[[Any], Any]:
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
