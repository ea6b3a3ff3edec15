"""What ``torchclad.function``'s arguments say about the op, checked before anything is built.

- :func:`normalize` checks the arguments' own types (before the engine or the compiler runs):
  ``inputs`` a list of names (or Clad's ``"a, b"``), ``outputs`` ``{param: shape_fn or dims}``,
  ``sizes`` ``{param: fn}``, ``input_shapes`` ``{input: dims}``.
- :func:`check` checks them against the kernel's signature (from the engine, or from the cache
  without it): every name a parameter, every pointer an input or an output, every scalar a size
  or a differentiable input, ...
- :class:`Contract` is the optional shape contract: ``input_shapes={"x": ("N", "C"), "w":
  ("C",)}`` checks every call's input shapes (rank, fixed sizes, one value per symbol) and gives
  the integer parameters named like a symbol their value, and outputs given as dims their shape.

A floating scalar parameter (``T alpha``) listed in ``inputs`` is differentiable: the op takes
it as a 0-dim tensor and returns its gradient as one.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

__all__ = ["normalize", "check", "Contract", "dims_text"]

Dims = tuple  # of str symbols and int sizes


def _is_dims(v: Any) -> bool:
    return isinstance(v, (tuple, list)) and all(
        (isinstance(d, str) and d.isidentifier()) or (isinstance(d, int) and not isinstance(d, bool)
                                                      and d >= 0) for d in v)


def dims_text(dims: Sequence) -> str:
    """``(N, C)``, ``(C,)``: dims as a message spells them."""
    inner = ", ".join(str(d) for d in dims)
    return f"({inner},)" if len(dims) == 1 else f"({inner})"


def normalize(inputs: Any, outputs: Any, sizes: Any, input_shapes: Any):
    """``(inputs tuple, outputs dict, sizes dict, input_shapes dict)`` after the type checks."""
    if isinstance(inputs, str):  # "a, b" like Clad's argument strings
        inputs = [n.strip() for n in inputs.split(",") if n.strip()]
    if not isinstance(inputs, (list, tuple)) or not all(isinstance(n, str) for n in inputs):
        raise TypeError(f"inputs must be a list of parameter names, e.g. inputs=['x', 'w'], got "
                        f"{inputs!r}")
    if not isinstance(outputs, Mapping) or (sizes is not None and not isinstance(sizes, Mapping)):
        raise TypeError("outputs and sizes must be dicts {param: fn}, e.g. "
                        "outputs={'out': lambda x: x.shape}, sizes={'N': lambda x: x.numel()}")
    for n, v in outputs.items():
        if not callable(v) and not _is_dims(v):
            raise TypeError(f"outputs[{n!r}] must be a function of the inputs returning a shape, "
                            f"or the output's dims (e.g. ('N', 'C') with input_shapes=), got {v!r}")
    for n, v in (sizes or {}).items():
        if not callable(v):
            raise TypeError(f"sizes[{n!r}] must be a function of the inputs, got {v!r}")
    if input_shapes is not None:
        if not isinstance(input_shapes, Mapping):
            raise TypeError("input_shapes must be a dict {input: dims}, e.g. "
                            "input_shapes={'x': ('N', 'C'), 'w': ('C',)}")
        for n, v in input_shapes.items():
            if not _is_dims(v):
                raise TypeError(f"input_shapes[{n!r}] must be a tuple of dimension names "
                                f"(identifiers) and sizes (ints >= 0), got {v!r}")
            if n not in inputs:
                raise ValueError(f"input_shapes: {n!r} is not in inputs {list(inputs)}")
    return tuple(inputs), dict(outputs), dict(sizes or {}), dict(input_shapes or {})


def check(k: Any, inputs: Sequence[str], outputs: Mapping, sizes: Mapping) -> None:
    """Check the spec against the kernel ``k`` (a :class:`~torchclad.bridge.kernel.Kernel`;
    only its signature is used): ValueError / TypeError naming the parameter."""
    sig = f"{k.name}({', '.join(p.name for p in k.params)})"
    for group, names in (("inputs", tuple(inputs)), ("outputs", tuple(outputs)),
                         ("sizes", tuple(sizes))):
        for n in names:
            if n not in k.by_name:
                raise ValueError(f"{group}: {n!r} is not a parameter of {sig}")
    if len(set(inputs)) != len(inputs):
        raise ValueError(f"inputs: a parameter is listed twice in {list(inputs)}")
    for n in inputs:
        p = k.by_name[n]
        if not p.pointer and not k.is_float(p):
            raise ValueError(f"inputs: {n!r} of {sig} is a scalar {p.base}; give scalars in "
                             f"sizes={{{n!r}: fn}} (a floating scalar in inputs is a "
                             "differentiable 0-dim tensor)")
        if n in sizes:
            raise ValueError(f"{n!r} is in both inputs and sizes; list it in one of them")
    for n in outputs:
        p = k.by_name[n]
        if not p.pointer or p.const:
            what = "a scalar" if not p.pointer else "a const pointer (read-only)"
            raise ValueError(f"outputs: {n!r} of {sig} is {what}; "
                             "outputs are the arrays the kernel writes")
    for n in sizes:
        if k.by_name[n].pointer:
            raise ValueError(f"sizes: {n!r} of {sig} is a pointer; list arrays in inputs or outputs")
    _check_coverage(k, sig, inputs, outputs, sizes)


def _check_coverage(k: Any, sig: str, inputs, outputs, sizes) -> None:
    """Every parameter has a source, every output an adjoint, the op an output."""
    for p in k.params:
        if p.pointer and p.name not in inputs and p.name not in outputs:
            raise ValueError(f"{sig}: pointer parameter {p.name!r} is in neither inputs nor outputs")
        if not p.pointer and p.name not in sizes and p.name not in inputs:
            raise ValueError(
                f"{sig}: scalar parameter {p.name!r} has no value; add "
                f"sizes={{{p.name!r}: lambda *inputs: ...}}"
                + (", or input_shapes= naming a dimension after it" if not k.is_float(p) else
                   f", or list it in inputs (a 0-dim tensor, differentiable)")
            )
    for n in outputs:
        if k.is_float(k.by_name[n]) and n not in k.adjoints:
            raise ValueError(
                f"{sig}: output {n!r} has no adjoint in the generated pullback "
                f"(adjoints: {list(k.adjoints)}); "
                "outputs must be differentiated to be seeded"
            )
    if not outputs and k.ret is None:
        raise ValueError(f"{sig}: a void kernel needs at least one entry in outputs")


class Contract:
    """The shape contract of an op: ``{input: dims}`` (see the module docstring).

    ``op`` names the op in messages; ``inputs`` are the op's inputs in order."""

    def __init__(self, op: str, inputs: Sequence[str], input_shapes: Mapping[str, Sequence]):
        self.op = op
        self.inputs = tuple(inputs)
        self.dims = {n: tuple(d) for n, d in input_shapes.items()}
        self.symbols = tuple(dict.fromkeys(d for ds in self.dims.values() for d in ds
                                           if isinstance(d, str)))
        self._order = [(self.inputs.index(n), n, ds) for n, ds in self.dims.items()]

    def __bool__(self) -> bool:
        return bool(self.dims)

    def _spelled(self) -> str:
        return ", ".join(f"{n}={dims_text(d)}" for n, d in self.dims.items())

    def bind(self, ins: Sequence[Any]) -> dict:
        """``{symbol: size}`` for these inputs; ValueError naming the input that breaks it."""
        env: dict[str, Any] = {}
        where: dict[str, str] = {}
        for pos, n, ds in self._order:
            shape = tuple(ins[pos].shape)
            if len(shape) != len(ds):
                raise ValueError(f"{self.op}: input '{n}' must have {len(ds)} dimension(s) "
                                 f"{dims_text(ds)}, got shape {shape} "
                                 f"(input_shapes: {self._spelled()})")
            for i, (d, s) in enumerate(zip(ds, shape)):
                if isinstance(d, int):
                    if s != d:
                        raise ValueError(f"{self.op}: input '{n}' has shape {shape}; dimension "
                                         f"{i} must be {d} (input_shapes: {self._spelled()})")
                elif d not in env:
                    env[d], where[d] = s, f"input '{n}' of shape {shape}"
                elif env[d] != s:
                    raise ValueError(f"{self.op}: input '{n}' has shape {shape}, expected "
                                     f"{dims_text(ds)} with {d} = {env[d]} (from {where[d]}); "
                                     f"input_shapes: {self._spelled()}")
        return env

    def size_fn(self, symbol: str) -> Callable:
        """A size function: the value of ``symbol``."""
        if symbol not in self.symbols:
            raise KeyError(symbol)

        def size(*ins):
            return self.bind(ins)[symbol]
        size.__name__ = f"contract_{symbol}"
        return size

    def shape_fn(self, dims: Sequence) -> Callable:
        """An output shape function: ``dims`` with each symbol's value."""
        unknown = [d for d in dims if isinstance(d, str) and d not in self.symbols]
        if unknown:
            raise ValueError(f"{self.op}: output dims {dims_text(dims)} name {unknown}, which no "
                             f"input of input_shapes has (input_shapes: {self._spelled()})")

        def shape(*ins):
            env = self.bind(ins) if self.symbols else {}
            return tuple(env[d] if isinstance(d, str) else d for d in dims)
        return shape
