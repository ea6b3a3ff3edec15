"""``torchclad.gradient``: run a generated pullback directly, like ``clad::gradient``.

::

    g = torchclad.gradient(src, "f", wrt="x, y")
    print(g.source)            # the generated C++ (f_pullback, ...)
    dx, dy = g(2.0, 3.0)       # seed 1 on f's return value

This module imports nothing heavy at import time (``torchclad/__init__`` imports it eagerly);
torch, the engine and the build machinery are imported on first use.
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["Compiled", "Gradient", "gradient", "bind_args"]


def gradient(source: str, name: str, wrt: Any = None) -> "Gradient":
    """Differentiate ``name`` in the C++ ``source`` and JIT-compile its pullback.

    ``wrt`` is Clad's argument string (``"x, y"`` or ``"0, 2"``), a list of names, or None for
    every floating parameter. Output arrays the function writes get adjoints even when ``wrt``
    leaves them out (the engine adds them), so ``grad_outputs`` can always seed them; the
    result tuple follows ``wrt``.
    """
    from torchclad import engine, toolchain

    deriv = engine.differentiate(source, name, wrt)
    return Gradient(deriv, toolchain.load(deriv))


class Compiled:
    """A compiled derivative of one function: ``source`` (the generated C++), ``wrt``, and its
    kernel; :class:`Gradient` and the forward-mode callables
    (:mod:`torchclad.bridge.forward`) are ones."""

    def __init__(self, derivative: Any, module: Any):
        from torchclad.bridge.kernel import Kernel

        self.derivative = derivative
        self._k = Kernel(derivative, module)
        self.wrt: tuple[str, ...] = tuple(derivative.wrt)

    @property
    def kernel(self) -> Any:
        return self._k

    @property
    def name(self) -> str:
        return self._k.name

    @property
    def source(self) -> str:
        return self.derivative.code

    def dump(self) -> None:
        print(self.source)


class Gradient(Compiled):
    """The compiled pullback of one function; call it to get gradients.

    ``source`` is the generated C++ derivative code; ``wrt`` the names gradients are returned for.
    """

    def __repr__(self) -> str:
        sig = ", ".join(("const " * bool(p.const)) + p.base + "*" * p.pointer + " " + p.name
                        for p in self._k.params)
        return f"<torchclad.Gradient of {self._k.name}({sig}) wrt ({', '.join(self.wrt)})>"

    # ---- calling

    def __call__(self, *args: Any, grad_outputs: Mapping[str, Any] | None = None) -> tuple:
        import torch

        k = self._k
        scalar, values, bufs = bind_args(k, args)

        grad_outputs = dict(grad_outputs or {})
        seed = 1.0
        if not k.void and "return" in grad_outputs:
            seed = float(grad_outputs.pop("return"))
        adjoints: dict[str, torch.Tensor] = {}
        for w in k.adjoints:
            p = k.by_name[w]
            if p.pointer:
                adjoints[w] = torch.zeros_like(bufs[w])
            else:
                adjoints[w] = torch.zeros((), dtype=k.dtype_of(p, scalar))
        for key, g in grad_outputs.items():
            if key not in adjoints or not k.by_name[key].pointer:
                arrays = [w for w in k.adjoints if k.by_name[w].pointer]
                raise ValueError(
                    f"{k.name}: grad_outputs[{key!r}]: expected one of the differentiated arrays "
                    f"{arrays}" + (" or 'return'" if not k.void else "")
                )
            g = torch.as_tensor(g)
            if g.numel() != adjoints[key].numel():
                raise ValueError(
                    f"{k.name}: grad_outputs[{key!r}] has {g.numel()} element(s), expected "
                    f"{adjoints[key].numel()} (the shape of argument '{key}', {tuple(adjoints[key].shape)})"
                )
            adjoints[key].copy_(g.detach().reshape(adjoints[key].shape))

        call = values + ([] if k.void else [seed]) + [adjoints[w].data_ptr() for w in k.adjoints]
        k.binding("pullback", scalar)(*call)

        out = []
        for w in self.wrt:
            p = k.by_name[w]
            out.append(adjoints[w] if p.pointer else adjoints[w].item())
        return tuple(out)


def bind_args(k: Any, args: tuple) -> tuple:
    """``(scalar, values, bufs)`` for calling kernel ``k``'s bindings with ``args``: the scalar
    type the tensors select, the argument of each parameter (an address for an array, a
    number for a scalar) and the copy of each array (the kernel may write to outputs; the
    caller's tensors stay untouched). Wrong arguments raise with what was expected."""
    import torch

    from torchclad.bridge.kernel import describe

    if len(args) != len(k.params):
        names = ", ".join(p.name for p in k.params)
        raise TypeError(f"{k.name}({names}) takes {len(k.params)} argument(s), got {len(args)}")
    tensors: dict[str, torch.Tensor] = {}
    for p, a in zip(k.params, args):
        if p.pointer:
            tensors[p.name] = _as_tensor(k, p, a)
        elif isinstance(a, torch.Tensor) and a.dim() > 0 or _is_array_like(a):
            raise TypeError(
                f"{k.name}: argument '{p.name}' is a scalar {p.base}; got {describe(a)} "
                "(pass a Python number)"
            )
    scalar = k.pick_scalar(tensors)
    values: list[Any] = []
    bufs: dict[str, torch.Tensor] = {}
    for p, a in zip(k.params, args):
        if p.pointer:
            t = tensors[p.name]
            k.check_tensor(p, t, scalar)
            bufs[p.name] = t.detach().clone(memory_format=torch.contiguous_format)
            values.append(bufs[p.name].data_ptr())
        else:
            values.append(_as_scalar(k, p, a, scalar))
    return scalar, values, bufs


def _is_array_like(a: Any) -> bool:
    return hasattr(a, "__array_interface__") and getattr(a, "ndim", 0) > 0 or isinstance(a, (list, tuple))


def _as_tensor(k: Any, p: Any, a: Any):
    import torch

    from torchclad.bridge.kernel import describe

    if isinstance(a, torch.Tensor):
        return a
    if hasattr(a, "__array_interface__") or hasattr(a, "__array__"):
        return torch.as_tensor(a)
    raise TypeError(
        f"{k.name}: argument '{p.name}' is a pointer ({p.base}*); expected a torch tensor "
        f"(or numpy array), got {describe(a)}"
    )


def _as_scalar(k: Any, p: Any, a: Any, scalar: str) -> Any:
    import torch

    from torchclad.bridge.kernel import describe

    if isinstance(a, torch.Tensor) or hasattr(a, "item") and getattr(a, "ndim", 1) == 0:
        a = a.item()
    base = k.scalar_for(p, scalar)
    if base in ("float", "double", "long double"):
        if isinstance(a, (int, float)) and not isinstance(a, bool):
            return float(a)
    elif base == "bool":
        if isinstance(a, (bool, int)):
            return bool(a)
    elif isinstance(a, int):
        return int(a)
    raise TypeError(f"{k.name}: argument '{p.name}' is a scalar {base}; got {describe(a)}")
