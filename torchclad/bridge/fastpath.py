"""The eager path of a user-kernel op in C++: ``torchclad._C_dispatch.KernelCall``.

A JIT-compiled kernel exports C entry points of one signature (:mod:`torchclad.toolchain.capi`),
so the prebuilt extension ``torchclad._C_dispatch`` (``csrc/dispatch/kernel_call.cpp``) can
call them directly: checks, the per-shape plan, output allocation, the entry point, and -- when
autograd records -- a C++ autograd node whose backward runs only the reverse sweep. A call
costs a few microseconds instead of the tens of a Python ``autograd.Function``.

:func:`kernel_call` describes a :class:`~torchclad.bridge.op.KernelOp` to it (argument
layout, dtypes, entry addresses, the adjoints' roles) and hands it two Python functions:

- the planner, run once per new call signature: the op's own :class:`~torchclad.bridge.plan.
  Planner` (dtype checks, shape contract, shape functions), whose result the C++ side keeps;
- the backward under ``create_graph=True``: :func:`torchclad.bridge.autograd.backward_of`, the
  registered op's formula.

When the fast path is not taken (:meth:`KernelOp.__call__`): ``torch.compile``, a dispatch
mode (fake tensors, opcheck, FX), a functorch transform (vmap, grad, jvp), tracing, tensor
subclasses -- and, checked in C++, an input with a forward-mode tangent, an unexpected dtype or
device (the Python path then explains). Debug ops never take it; the built-in kernels take it
through the C entry points of their CPU-specific build (:mod:`torchclad.builtin.loader`; not
with the baseline pybind11 ``_C`` alone).
Without the extension (not built) every call takes the Python path.
"""

from __future__ import annotations

from typing import Any

import torch

from torchclad.bridge import autograd
from torchclad.toolchain import capi
from torchclad.toolchain.clib import KernelLibrary
from torchclad.toolchain.glue import binding_name

__all__ = ["extension", "kernel_call", "ROLES", "live_tapes"]

#: the adjoint roles of kernel_call.cpp
ROLES = {"input": 0, "seed": 1, "inout": 2, "scalar_input": 3, "scratch": 4}
_missing = object()
_ext: Any = _missing


def extension():
    """``torchclad._C_dispatch``, or None when it was not built (or does not load)."""
    global _ext
    if _ext is _missing:
        try:
            from torchclad import _C_dispatch
            _ext = _C_dispatch
        except ImportError:
            _ext = None
    return _ext


def live_tapes() -> int:
    """Tapes held by C++ nodes whose backward has not run (0 without the extension)."""
    ext = extension()
    return ext.live_tapes() if ext is not None else 0


def _planner(kop: Any):
    """``planner(*ins) -> (output shapes (None for in-out outputs), {param: static value},
    [(param, fn(*ins) -> value)])`` from the op's Python plan."""
    k = kop.k
    inputs = set(kop.inputs)
    params = k.params

    def dynamic(fn, conv):
        def value(*ins):
            v = fn(*ins)
            return conv(v.item() if isinstance(v, torch.Tensor) else v)
        return value

    def plan(*ins):
        p = kop.planner.plan(ins)
        shapes = dict((n, tuple(int(d) for d in shape)) for n, shape, _ in p.outs)
        static = {i: v for i, v in enumerate(p.args) if v is not None}
        dyn = [(i, dynamic(fn, conv)) for i, fn, conv in p.dyn if params[i].name not in inputs]
        return [shapes.get(n) for n in kop.out_names], static, dyn
    return plan


def _adjoints(kop: Any) -> tuple[list, list, list]:
    """Role, output-or-input index and gradient-of-input index of each adjoint."""
    k = kop.k
    roles, index, of_input = [], [], []
    for w in k.adjoints:
        p = k.by_name[w]
        i = kop.inputs.index(w) if w in kop.inputs else -1
        o = kop.out_names.index(w) if w in kop.out_names else -1
        if o >= 0:
            role = "inout" if i >= 0 else "seed"
        elif i >= 0:
            role = "input" if p.pointer else "scalar_input"
        else:
            role = "scratch"  # a floating size: its adjoint is computed, not returned
        roles.append(ROLES[role])
        index.append(o if o >= 0 else i)
        of_input.append(i if i in kop.diff_in else -1)
    return roles, index, of_input


def kernel_call(kop: Any):
    """The ``KernelCall`` of ``kop``, or None when it cannot have one (no extension, a debug
    op, a kernel not built by :mod:`torchclad.toolchain.jit`)."""
    ext = extension()
    k = kop.k
    if ext is None or kop.debug or not isinstance(k.module, KernelLibrary):
        return None
    if kop.has_ret and not k.seeded:
        return None           # an integer result: the sweep takes no seed (the Python path)
    lib: KernelLibrary = k.module
    scalars = list(kop.planner.out_dtypes)
    params = list(k.params)
    by = k.by_name

    def dtypes(names, s):
        return [k.dtype_of(by[n], s) for n in names]

    template_input = next((i for i, n in enumerate(kop.inputs) if by[n].base in k.template), -1)
    roles, index, of_input = _adjoints(kop)
    cfg = dict(
        name=kop.opname, n_params=len(params),
        in_param=[params.index(by[n]) for n in kop.inputs],
        in_kind=[2 if not by[n].pointer else int(copy)
                 for n, copy in zip(kop.inputs, kop.in_copy)],
        in_dtype=[dtypes(kop.inputs, s) for s in scalars], template_input=template_input,
        entries=[[lib.address(binding_name(k.name, kind, s))
                  for kind in ("", "reverse_forw", "reverse_sweep")]
                 + [lib.helper_address(s, sym)
                    for sym in (capi.TAPE_NEW, capi.TAPE_FREE, capi.LAST_ERROR)]
                 + [_assign_address(lib, k.name, s)]
                 for s in scalars],
        out_param=[params.index(by[n]) for n in kop.out_names],
        out_input=[kop.inputs.index(n) if n in kop.inputs else -1 for n in kop.out_names],
        out_dtype=[list(kop.planner.out_dtypes[s]) for s in scalars],
        codes="".join("p" if p.pointer else "d" if k.is_float(p) else "i" for p in params),
        zero_outputs=kop.zero_outputs, has_ret=kop.has_ret, ret_diff=kop.ret_diff,
        sweep_restores=kop.sweep_restores,
        ret_code="d" if kop.has_ret and k.is_float(k.ret) else "i",
        ret_dtype=[[k.dtype_of(k.ret, s)] for s in scalars] if kop.has_ret else [],
        adj_role=roles, adj_index=index, adj_input=of_input,
        adj_extent=_assign_extents(k, params),
        adj_copy=_assign_copies(k),
        assign_nonneg=[params.index(k.by_name[n])
                       for n in getattr(k.sig, "assign_nonneg", ()) or ()],
        adj_dtype=[dtypes(k.adjoints, s) for s in scalars],
        diff_in=list(kop.diff_in),
        diff_out=list(kop.diff_out) + ([len(kop.out_names)] if kop.ret_diff else []),
        planner=_planner(kop), fallback=_fallback(kop))
    return ext.KernelCall(cfg)


def _assign_address(lib: KernelLibrary, name: str, scalar: str) -> int:
    """The entry of the assigning sweep (``reverse_sweep_assign``: a custom derivative's
    ``f_pullback_assign``), 0 when the kernel has none. The C++ backward then gives it adjoint
    buffers it does not zero-fill and the grads as they come (it only reads them)."""
    binding = binding_name(name, "reverse_sweep_assign", scalar)
    return lib.address(binding) if lib.has(binding) else 0


def _assign_extents(k: Any, params: list) -> list:
    """Per adjoint, the parameters whose product is the number of elements the assigning sweep
    writes (a generated sweep: ``Derivative.assign_extents``, ``N`` or ``N*C``), ``[-2]`` when
    it adds into that adjoint (a generated sweep that only reads its seeds: zero-filled),
    ``[]`` when it writes them all (a custom ``f_pullback_assign``) or is not an input's. The
    C++ backward zero-fills an input adjoint whose buffer has another size, and takes the
    accumulating sweep for one smaller than that."""
    ext = dict(getattr(k.sig, "assign_extents", ()) or ())
    return [([params.index(k.by_name[n]) for n in ext[w].split("*")] if ext[w] else [-2])
            if w in ext else [] for w in k.adjoints]


def _assign_copies(k: Any) -> list:
    """Per adjoint, the adjoint of the seed the assigning sweep copies into it element for
    element (``Derivative.assign_copies``), -1 for none. When every input adjoint is such a
    copy and the sizes agree, the C++ backward hands each grad on as the input's gradient
    without running the sweep."""
    copies = dict(getattr(k.sig, "assign_copies", ()) or ())
    return [k.adjoints.index(copies[w]) if w in copies else -1 for w in k.adjoints]


def _fallback(kop: Any):
    """The backward under create_graph=True: grads arrive per differentiable output (then the
    result's), the registered op's formula takes one per output."""
    slots = list(kop.diff_out) + ([len(kop.out_names)] if kop.ret_diff else [])

    def backward(ins, outs, grads):
        full: list[Any] = [None] * kop.n_out
        for slot, g in zip(slots, grads):
            full[slot] = g
        return autograd.backward_of(kop, tuple(ins), tuple(outs), tuple(full))
    return backward
