"""A compiled kernel as the Python bridge sees it: signature, bindings, dtypes.

Shared by :mod:`torchclad.bridge.gradient` (combined mode, ``f_pullback``) and
:mod:`torchclad.bridge.op` (split mode, ``f_reverse_forw`` / ``f_reverse_sweep``). The signature
is a Derivative-like object (docs/internals.md): ``name``, ``params`` (``ParamInfo``: name, base,
pointer, const), ``return_type``, ``wrt``, ``template_params``. The module has the bindings
described in :mod:`torchclad.toolchain.glue` (named by its ``binding_name``); pointers and
adjoints are passed as integer addresses.
"""

from __future__ import annotations

from typing import Any

import torch

from torchclad.toolchain.glue import binding_name

# C++ scalar spelling -> torch dtype of an array of it. ``long`` is 64-bit (LP64: Linux, macOS).
_INT_DTYPES = {
    torch.int32: ("int", "int32_t", "std::int32_t", "unsigned", "unsigned int", "uint32_t",
                  "std::uint32_t", "signed", "signed int"),
    torch.int64: ("long", "long int", "long long", "long long int", "int64_t", "std::int64_t",
                  "size_t", "std::size_t", "ptrdiff_t", "std::ptrdiff_t", "unsigned long",
                  "unsigned long int", "unsigned long long", "uint64_t", "std::uint64_t"),
    torch.int16: ("short", "short int", "unsigned short", "int16_t", "std::int16_t"),
    torch.int8: ("char", "signed char", "int8_t", "std::int8_t"),
    torch.uint8: ("unsigned char", "uint8_t", "std::uint8_t"),
    torch.bool: ("bool",),
}
BASE_DTYPE: dict[str, torch.dtype] = {"float": torch.float32, "double": torch.float64}
for _dt, _names in _INT_DTYPES.items():
    BASE_DTYPE.update(dict.fromkeys(_names, _dt))

SCALAR_OF_DTYPE = {torch.float32: "float", torch.float64: "double"}
FLOAT_BASES = ("float", "double")


def dtype_name(dtype: torch.dtype) -> str:
    """``float32`` for ``torch.float32``: a dtype as messages spell it."""
    return str(dtype).removeprefix("torch.")


def describe(x: Any) -> str:
    """Short description of an argument for error messages."""
    if isinstance(x, torch.Tensor):
        return f"a {dtype_name(x.dtype)} tensor of shape {tuple(x.shape)} on {x.device}"
    return f"{type(x).__name__} {x!r}" if isinstance(x, (int, float, bool)) else type(x).__name__


class Kernel:
    """Signature + compiled module of one differentiated C++ function."""

    def __init__(self, sig: Any, module: Any):
        self.sig = sig
        self.module = module
        self._bindings: dict[tuple[str, str], Any] = {}
        self.name: str = sig.name
        self.params = tuple(sig.params)
        self.by_name = {p.name: p for p in self.params}
        self.wrt: tuple[str, ...] = tuple(sig.wrt)
        # Adjoint parameters of the generated functions, in order: the wrt params, then the
        # written (output) params the engine adds so that they can be seeded.
        self.adjoints: tuple[str, ...] = tuple(getattr(sig, "adjoints", None) or sig.wrt)
        self.template = tuple(sig.template_params)
        ret = sig.return_type
        self.void = ret is None or (ret.base == "void" and not getattr(ret, "pointer", 0))
        self.ret = None if self.void else ret
        # the generated functions take the result's seed: a floating result only
        self.seeded = self.ret is not None and bool(self.ret.differentiable)
        for p in self.params:
            if p.pointer and not self.is_float(p) and p.base not in BASE_DTYPE:
                raise TypeError(
                    f"{self.name}: parameter {p.base}* {p.name} has no torch dtype; torchclad "
                    "passes arrays of float, double, a template type T, or integer/bool types"
                )
        if self.ret is not None and not (self.is_float(self.ret) or self.ret.base in BASE_DTYPE):
            raise TypeError(f"{self.name}: return type {self.ret.base} is not supported")

    # ---- types

    def is_float(self, p: Any) -> bool:
        return p.base in FLOAT_BASES or p.base in self.template

    def scalar_for(self, p: Any, scalar: str) -> str:
        """C++ scalar type of ``p`` (a template parameter replaced by ``scalar``)."""
        return scalar if p.base in self.template else p.base

    def dtype_of(self, p: Any, scalar: str) -> torch.dtype:
        return BASE_DTYPE[self.scalar_for(p, scalar)]

    def scalars(self) -> tuple[str, ...]:
        """Scalar types the module was built for (both for a template, else the declared one)."""
        if self.template:
            return ("float", "double")
        return tuple(s for s in FLOAT_BASES
                     if hasattr(self.module, binding_name(self.name, "", s)))

    def default_scalar(self) -> str:
        avail = self.scalars()
        if not avail:
            raise RuntimeError(
                f"{self.name}: the compiled module has no binding "
                f"{binding_name(self.name, '', 'float')} or "
                f"{binding_name(self.name, '', 'double')}")
        return "double" if "double" in avail else avail[0]

    def pick_scalar(self, tensors: dict[str, torch.Tensor], *, what: str = "argument") -> str:
        """Scalar type selected by the dtypes of the tensors bound to template-typed pointers."""
        if not self.template:
            return self.default_scalar()
        chosen: tuple[str, torch.dtype] | None = None
        for p in self.params:
            t = tensors.get(p.name)
            if t is None or p.base not in self.template:  # (a scalar input: a 0-dim tensor)
                continue
            if t.dtype not in SCALAR_OF_DTYPE:
                raise TypeError(
                    f"{self.name}: {what} '{p.name}' is a {dtype_name(t.dtype)} tensor; "
                    f"{p.base}{'*' * bool(p.pointer)} accepts float32 or float64 tensors"
                )
            if chosen is None:
                chosen = (p.name, t.dtype)
            elif t.dtype != chosen[1]:
                raise TypeError(
                    f"{self.name}: {what} '{p.name}' is {dtype_name(t.dtype)} but '{chosen[0]}' "
                    f"is {dtype_name(chosen[1])}; all {p.base} arguments must have one dtype "
                    "(convert with .to(dtype))"
                )
        return "double" if chosen is None else SCALAR_OF_DTYPE[chosen[1]]

    def check_tensor(self, p: Any, t: torch.Tensor, scalar: str, *, what: str = "argument") -> None:
        if t.device.type != "cpu":
            raise ValueError(
                f"{self.name}: {what} '{p.name}' is on {t.device}; torchclad kernels run on the "
                "CPU only (move it with .cpu())"
            )
        want = self.dtype_of(p, scalar)
        if t.dtype != want:
            spelled = "const " * bool(p.const) + self.scalar_for(p, scalar) + "*" * bool(p.pointer)
            raise TypeError(
                f"{self.name}: {what} '{p.name}' ({spelled}) must be a {dtype_name(want)} tensor, "
                f"got {dtype_name(t.dtype)} (convert with .to(torch.{dtype_name(want)}))"
            )

    # ---- bindings

    def binding(self, kind: str, scalar: str):
        """``kind``: "" (the primal) or one of :data:`torchclad.engine.names.KINDS`."""
        fn = self._bindings.get((kind, scalar))
        if fn is None:
            fn = self._bindings[(kind, scalar)] = self._lookup(kind, scalar)
        return fn

    def module_has(self, kind: str, scalar: str) -> bool:
        """Whether the compiled module has binding ``kind`` for ``scalar`` (the optional ones:
        ``reverse_sweep_assign``)."""
        return hasattr(self.module, binding_name(self.name, kind, scalar))

    def _lookup(self, kind: str, scalar: str):
        attr = binding_name(self.name, kind, scalar)
        fn = getattr(self.module, attr, None)
        if fn is None:
            raise RuntimeError(
                f"{self.name}: the compiled module {getattr(self.module, '__name__', '?')} has no "
                f"binding {attr} (scalar type {scalar})"
            )
        return fn

    def new_tape(self, scalar: str | None = None):
        """A tape for the split-mode bindings of ``scalar`` (a JIT kernel's libraries, one per
        scalar type, each make their own)."""
        make = getattr(self.module, "new_tape", None)
        return make(scalar) if make is not None else self.module.Tape()
