"""A compiled user kernel loaded with ctypes: its C entry points as Python callables.

:class:`KernelLibrary` offers what the bridge expects of a compiled module
(:class:`torchclad.bridge.kernel.Kernel`): an attribute per binding (``mul_tanh_pullback_f32``
...) taking the arguments of :mod:`torchclad.toolchain.glue`'s convention -- pointers and
adjoints as integer addresses, scalars as numbers, a :class:`Tape` last in split mode -- and
``Tape()``. Underneath each one is the uniform C entry point of :mod:`torchclad.toolchain.capi`,
called through ctypes (which releases the GIL for the call). :meth:`KernelLibrary.address`
gives an entry point's address for callers that call it directly (the prebuilt
``torchclad._C_dispatch``).

A C++ exception in the kernel raises :class:`KernelError`; a memory fault or sanitizer trap
caught by a debug build (``capi.h``) raises :class:`KernelFault`, which carries the faulting
address and instruction for the bridge to name the array and the source line.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path
from typing import Any, Mapping

from . import capi
from .glue import Call

__all__ = ["KernelLibrary", "Tape", "KernelError", "KernelFault", "Arg"]


class Arg(ctypes.Union):
    """``torchclad_arg`` (capi.h)."""

    _fields_ = [("p", ctypes.c_void_p), ("i", ctypes.c_longlong), ("d", ctypes.c_double)]


class _Fault(ctypes.Structure):
    _fields_ = [("signal", ctypes.c_int), ("write", ctypes.c_int), ("address", ctypes.c_void_p),
                ("pc", ctypes.c_void_p), ("object", ctypes.c_char_p), ("offset", ctypes.c_size_t)]


_ENTRY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(Arg), ctypes.c_void_p, ctypes.POINTER(Arg))


class KernelError(RuntimeError):
    """The kernel's C++ code threw (e.g. the tape could not allocate or spill)."""


class KernelFault(RuntimeError):
    """A debug build caught a memory fault (SIGSEGV / SIGBUS) or a sanitizer trap (SIGILL,
    SIGFPE) in the kernel. ``address``: the faulting address; ``write``: whether it was a
    write; ``source``: ``file:line`` of the faulting instruction when the debug information
    says (else ``""``)."""

    def __init__(self, message: str, *, signal: int, address: int, write: bool, source: str,
                 binding: str):
        super().__init__(message)
        self.signal, self.address, self.write = signal, address, write
        self.source, self.binding = source, binding


class Tape:
    """A ``torchclad::Tape`` made and freed by the library it is used with."""

    __slots__ = ("ptr", "_lib", "__weakref__")

    def __init__(self, lib: "_Loaded"):
        self._lib = lib
        self.ptr = lib.tape_new()
        if not self.ptr:
            raise MemoryError("torchclad: could not allocate a tape")

    def size_bytes(self) -> int:
        return int(self._lib.tape_bytes(self.ptr))

    def empty(self) -> bool:
        return bool(self._lib.tape_empty(self.ptr))

    def __del__(self):
        ptr, self.ptr = self.ptr, None
        if ptr:
            self._lib.tape_free(ptr)


class _Loaded:
    """One shared library (one scalar type) and its exported helpers."""

    def __init__(self, path: Path):
        self.path = path
        self.dll = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
        self.tape_new = self._fn(capi.TAPE_NEW, ctypes.c_void_p, [])
        self.tape_free = self._fn(capi.TAPE_FREE, None, [ctypes.c_void_p])
        self.tape_bytes = self._fn(capi.TAPE_BYTES, ctypes.c_size_t, [ctypes.c_void_p])
        self.tape_empty = self._fn(capi.TAPE_EMPTY, ctypes.c_int, [ctypes.c_void_p])
        self.last_error = self._fn(capi.LAST_ERROR, ctypes.c_char_p, [])
        self.last_fault = self._fn(capi.LAST_FAULT, ctypes.POINTER(_Fault), [])

    def _fn(self, symbol: str, restype, argtypes):
        fn = getattr(self.dll, symbol)
        fn.restype, fn.argtypes = restype, argtypes
        return fn

    def entry(self, binding: str):
        return _ENTRY((capi.entry_symbol(binding), self.dll))


def source_line(obj: str | None, offset: int) -> str:
    """``file:line`` of the instruction at ``offset`` in shared object ``obj`` (addr2line; the
    innermost inlined frame), or ``""`` when unknown."""
    tool = shutil.which("addr2line")
    if not obj or not tool:
        return ""
    try:
        r = subprocess.run([tool, "-e", obj, "-i", hex(offset)], capture_output=True, text=True,
                           timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return ""
    first = (r.stdout.splitlines() or [""])[0].strip()
    if not first or first.startswith("??"):
        return ""
    return first.split(" (discriminator")[0]


_SIGNALS = {7: "SIGBUS", 11: "SIGSEGV", 4: "SIGILL", 8: "SIGFPE"}


class _Binding:
    """One entry point as a Python callable (glue's calling convention)."""

    __slots__ = ("lib", "fn", "codes", "tape", "ret", "name", "_arr")

    def __init__(self, lib: _Loaded, call: Call):
        from .capi import arg_codes

        self.lib, self.name = lib, call.binding
        self.fn = lib.entry(call.binding)
        self.codes = arg_codes(call)
        self.tape = any(s.role == "tape" for s in call.slots)
        self.ret = None if call.result == "void" else (
            "d" if call.result.replace("const ", "").strip() in ("float", "double") else "i")
        self._arr = Arg * len(self.codes)

    def __call__(self, *args):
        n = len(self.codes)
        if len(args) != n + self.tape:
            raise TypeError(f"{self.name}() takes {n + self.tape} arguments, got {len(args)}")
        arr = self._arr()
        for slot, code, value in zip(arr, self.codes, args):
            setattr(slot, code, value)
        tape = args[n].ptr if self.tape else None
        ret = Arg()
        status = self.fn(arr, tape, ctypes.byref(ret))
        if status:
            raise self._failure(status)
        if self.ret is None:
            return None
        return ret.d if self.ret == "d" else ret.i

    def _failure(self, status: int) -> Exception:
        if status == 2:
            f = self.lib.last_fault().contents
            obj = f.object.decode(errors="replace") if f.object else None
            sig = _SIGNALS.get(f.signal, str(f.signal))
            return KernelFault(
                f"torchclad: {self.name} stopped by {sig} at address {f.address or 0:#x}",
                signal=f.signal, address=f.address or 0, write=bool(f.write),
                source=source_line(obj, f.offset), binding=self.name)
        msg = (self.lib.last_error() or b"").decode(errors="replace")
        return KernelError(f"torchclad: {self.name} failed: {msg}")


class KernelLibrary:
    """Loaded kernel libraries and their bindings.

    ``libs``: ``[(path, scalars, calls)]`` -- each shared library, the scalar types its tapes
    serve, and its bindings (``glue.Call``s). A JIT kernel has one library per scalar type; the
    CPU-specific build of the built-in kernels is one library for all of them."""

    def __init__(self, libs, *, key: str = "", debug: bool = False):
        self.key, self.debug = key, debug
        loaded = {}
        self._calls: dict[str, tuple[_Loaded, Call]] = {}
        self._by_scalar: dict[str, _Loaded] = {}
        for path, scalars, calls in libs:
            lib = loaded.get(str(path))
            if lib is None:
                lib = loaded[str(path)] = _Loaded(Path(path))
            for s in scalars:
                self._by_scalar.setdefault(s, lib)
            for c in calls:
                self._calls[c.binding] = (lib, c)
        self.libs = list(loaded.values())
        self._bindings: dict[str, _Binding] = {}
        self.__torchclad_kernels__ = sorted({c.callee.split("<")[0].rsplit("::", 1)[-1]
                                             for _, c in self._calls.values() if not c.kind})

    def __getattr__(self, attr: str) -> Any:
        calls = self.__dict__.get("_calls", {})
        if attr not in calls:
            raise AttributeError(attr)
        b = self._bindings.get(attr)
        if b is None:
            lib, call = calls[attr]
            b = self._bindings[attr] = _Binding(lib, call)
        return b

    def has(self, binding: str) -> bool:
        """Whether the library has the binding (``glue.binding_name``)."""
        return binding in self._calls

    def address(self, binding: str) -> int:
        """The address of a binding's entry point (``int (*)(const torchclad_arg*, void*,
        torchclad_arg*)``)."""
        lib, _ = self._calls[binding]
        return ctypes.cast(lib.entry(binding), ctypes.c_void_p).value or 0

    def helper_address(self, scalar: str, symbol: str) -> int:
        """The address of an exported helper (``capi.TAPE_NEW`` ...) of the ``scalar`` library."""
        return ctypes.cast(getattr(self._by_scalar[scalar].dll, symbol), ctypes.c_void_p).value or 0

    def string(self, symbol: str) -> str | None:
        """The C string a ``const char* symbol()`` export returns (None if there is none)."""
        try:
            fn = getattr(self.libs[0].dll, symbol)
        except AttributeError:
            return None
        fn.restype, fn.argtypes = ctypes.c_char_p, []
        value = fn()
        return value.decode() if value is not None else None

    def new_tape(self, scalar: str | None = None) -> Tape:
        """A tape made by the library of ``scalar`` (default: the first)."""
        lib = self._by_scalar[scalar] if scalar is not None else self.libs[0]
        return Tape(lib)

    Tape = new_tape  # the pybind11 modules' spelling
