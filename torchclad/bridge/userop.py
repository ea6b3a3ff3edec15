"""``torchclad.function``: a user's C++ kernel as a differentiable ``torch.library`` custom op.

::

    swiglu = torchclad.function(src, "swiglu", inputs=["a", "b"],
                                outputs={"out": ("N",)}, input_shapes={"a": ("N",), "b": ("N",)})
    y = swiglu(a, b)            # torch.ops.torchclad.swiglu_<hash>(a, b)

What happens, in order (:func:`function`):

1. The arguments are checked on their own (:func:`torchclad.bridge.spec.normalize`).
2. The build is looked up by recipe (:mod:`torchclad.toolchain.jit`: source, function name,
   options, toolchain): a hit gives the kernel's signature and libraries without running
   libclang or the compiler. Otherwise the engine differentiates the kernel (every floating
   parameter) and the spec is checked against its signature *before* the compiler runs (a
   wrong ``inputs=`` name is reported at once); then both scalar types compile at once.
   :func:`torchclad.gradient` shares this build (:func:`compiled`).
3. The op is registered (:func:`torchclad.bridge.op.make_op`): schema, fake, autograd.
"""

from __future__ import annotations

import hashlib
import os
import shlex
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from torchclad.bridge import spec
from torchclad.bridge.kernel import Kernel
from torchclad.bridge.op import make_op, op_identifier

__all__ = ["function", "compiled", "read_source", "cflags", "preprocessor_flags"]


def read_source(source: Any, filename: str | None) -> tuple[str, str]:
    """``(text, file name for messages)``: a path is read (and names itself); text is taken as
    it is (named ``filename``, default ``kernel.cpp``)."""
    if isinstance(source, os.PathLike):
        path = Path(source)
        return path.read_text(), filename or str(path)
    if not isinstance(source, str):
        raise TypeError(f"source must be the C++ text (str) or a path to it, got "
                        f"{type(source).__name__}")
    return source, filename or "kernel.cpp"


def cflags(extra_cflags: Any) -> tuple[str, ...]:
    """``extra_cflags`` as a tuple of words (a string is split like a shell word list)."""
    if extra_cflags is None:
        return ()
    if isinstance(extra_cflags, str):
        return tuple(shlex.split(extra_cflags))
    flags = tuple(extra_cflags)
    if not all(isinstance(f, str) for f in flags):
        raise TypeError(f"extra_cflags must be strings, got {extra_cflags!r}")
    return flags


def preprocessor_flags(flags: Sequence[str]) -> tuple[str, ...]:
    """The flags of ``flags`` that change what the source says (``-D``, ``-U``, ``-I``,
    ``-isystem``, ``-include``), which the engine's parse must see too."""
    out, take_next = [], False
    for f in flags:
        if take_next:
            out.append(f)
            take_next = False
        elif f in ("-D", "-U", "-I", "-isystem", "-include"):
            out.append(f)
            take_next = True
        elif f.startswith(("-D", "-U", "-I", "-isystem", "-include")):
            out.append(f)
    return tuple(out)


def compiled(source: str, name: str, *, filename: str, debug: bool = False,
             extra_cflags: Sequence[str] = (), check: Callable[[Any], None] | None = None):
    """The build of ``name`` in ``source`` shared by ``function`` and ``gradient`` (every
    floating parameter differentiated): from the cache when it has it, else differentiated and
    compiled. ``check(signature)`` runs before the compiler does (and on a cache hit)."""
    from torchclad.toolchain import jit

    recipe = jit.Recipe(source, name, filename, bool(debug), tuple(extra_cflags))
    built = jit.lookup(recipe)
    if built is not None:
        if check is not None:
            check(built.signature)
        return built
    from torchclad import engine

    deriv = engine.differentiate(source, name, None, filename=filename,
                                 options=engine.Options(extra_args=preprocessor_flags(extra_cflags)))
    if check is not None:
        check(deriv)
    return jit.build(recipe, deriv)


def function(source: Any, name: str, *, inputs: Sequence[str] | str,
             outputs: Mapping[str, Any], sizes: Mapping[str, Callable] | None = None,
             input_shapes: Mapping[str, Sequence] | None = None, debug: bool = False,
             extra_cflags: Sequence[str] | str = (), filename: str | None = None):
    """Differentiate ``name`` in the C++ ``source``, compile it and wrap it as a custom op.

    - ``inputs``: the parameters read from tensors, in the op's argument order: arrays, and
      floating scalars (``T alpha``) as 0-dim tensors, which then get a gradient.
    - ``outputs``: ``{param: shape}`` for the pointer parameters the kernel writes, a shape
      being a function of the inputs or dims over ``input_shapes``' symbols (``("N", "C")``);
      the op returns them in this order (one tensor, or a tuple). A parameter that is also in
      ``inputs`` is updated in place on a copy of the input. A non-void kernel's return value
      is returned last, as a 0-dim tensor.
    - ``sizes``: ``{param: fn}`` for the other scalar parameters (``int N``; a constant float).
    - ``input_shapes``: the shape contract ``{input: dims}`` (``{"x": ("N", "C"), "w":
      ("C",)}``): every call's shapes are checked against it, and the integer parameters named
      like a symbol get its value (no ``sizes`` entry needed).
    - ``debug=True``: a debug build (``-O1 -g``, sanitizer traps, no OpenMP) run on guarded
      buffers: an out-of-bounds access raises :class:`~torchclad.bridge.guard.MemoryFault`
      naming the array, instead of corrupting memory or killing the process.
    - ``extra_cflags``: compiler flags after the defaults (docs: README, "Your kernels").
    - ``filename``: the file name compiler and engine messages give the source (default: the
      path when ``source`` is a path, else ``kernel.cpp``).

    Every function receives the input tensors positionally. Templates give float32 and
    float64 from one source; CPU tensors only; non-contiguous inputs are accepted.
    Returns the ``torch.library`` custom op (a ``CustomOpDef``; call it like a function).
    """
    inputs, outputs, sizes, input_shapes = spec.normalize(inputs, outputs, sizes, input_shapes)
    flags = cflags(extra_cflags)
    text, filename = read_source(source, filename)
    if not isinstance(name, str) or not name.isidentifier():
        raise TypeError(f"name must be the kernel function's name, got {name!r}")
    contract = spec.Contract(name, inputs, input_shapes) if input_shapes else None
    resolved: dict[str, Any] = {}

    def check(sig: Any) -> None:
        k = Kernel(sig, None)
        all_sizes, static = dict(sizes), set()
        if contract is not None:
            for p in k.params:
                if (not p.pointer and p.name not in sizes and p.name not in inputs
                        and p.name in contract.symbols):
                    all_sizes[p.name] = contract.size_fn(p.name)
                    static.add(p.name)
        outs = {n: (v if callable(v) else _shape_fn(contract, name, v))
                for n, v in outputs.items()}
        spec.check(k, inputs, outs, all_sizes)
        resolved.update(outputs=outs, sizes=all_sizes, static=static)

    built = compiled(text, name, filename=filename, debug=debug, extra_cflags=flags, check=check)
    spec_text = repr((text, name, inputs, tuple(outputs), tuple(sizes), input_shapes,
                      bool(debug), flags, filename))
    digest = hashlib.sha256(spec_text.encode()).hexdigest()[:10]
    kernel = Kernel(built.signature, built.library)
    return make_op(kernel, f"{op_identifier(name)}_{digest}", inputs=inputs,
                   outputs=resolved["outputs"], sizes=resolved["sizes"],
                   static_sizes=sorted(resolved["static"]), contract=contract, debug=debug,
                   user_file=filename, higher_order=_higher_order(text, name, filename, flags)).op


def _higher_order(source: str, name: str, filename: str, flags: Sequence[str]) -> Callable:
    """``() -> (Derivative, linker flags)`` of the kernel in forward mode and forward over
    reverse (the op's jvp and double backward, :mod:`torchclad.bridge.higher`): generated and
    compiled on first use only."""

    def derive():
        from torchclad import engine

        return engine.differentiate(
            source, name, None, filename=filename, modes=("forward", "second"),
            options=engine.Options(extra_args=preprocessor_flags(flags))), ()

    return derive


def _shape_fn(contract: spec.Contract | None, op: str, dims: Sequence) -> Callable:
    """An output's shape function from its dims (symbols need ``input_shapes``)."""
    if contract is None:
        if any(isinstance(d, str) for d in dims):
            raise ValueError(f"{op}: output dims {spec.dims_text(dims)} name symbols, but there "
                             "is no input_shapes= to give them values")
        fixed = tuple(dims)
        return lambda *ins: fixed
    return contract.shape_fn(dims)
