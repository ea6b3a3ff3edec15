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


def gradient(source: Any, name: str, wrt: Any = None, *, debug: bool = False,
             extra_cflags: Any = (), filename: str | None = None) -> "Gradient":
    """Differentiate ``name`` in the C++ ``source`` and JIT-compile its pullback.

    ``wrt`` is Clad's argument string (``"x, y"`` or ``"0, 2"``), a list of names, or None for
    every floating parameter. Calling it, None for a pointer parameter passes ``nullptr`` (its
    adjoint is null too, and its gradient None). Output arrays the function writes get
    adjoints even when ``wrt`` leaves them out (the engine adds them), so ``grad_outputs`` can always seed them; the
    result tuple follows ``wrt``.

    The build is the one :func:`torchclad.function` makes for the same source and options
    (every floating parameter differentiated; :func:`torchclad.bridge.userop.compiled`): calls
    run its pullback and return the ``wrt`` gradients. ``source`` is the derivative for
    ``wrt`` itself, generated when first read (by the engine alone: nothing is compiled).
    ``debug``, ``extra_cflags``, ``filename``: as for :func:`torchclad.function`.
    """
    from torchclad.bridge.userop import cflags, compiled, preprocessor_flags, read_source

    text, filename = read_source(source, filename)
    flags = cflags(extra_cflags)
    built = compiled(text, name, filename=filename, debug=debug, extra_cflags=flags)
    names = select_wrt(built.signature, wrt)
    code = built.code if wrt is None else None
    return Gradient(built.signature, built.library, wrt=names, code=code,
                    regenerate=(text, name, wrt, filename, preprocessor_flags(flags)),
                    debug=debug)


def select_wrt(sig: Any, wrt: Any) -> tuple[str, ...]:
    """The parameter names ``wrt`` asks for (Clad's string, indices or names; None = every
    floating parameter), checked against the signature like the engine checks them."""
    from torchclad.engine import DiffError

    params = tuple(sig.params)
    reals = tuple(p.name for p in params if p.differentiable)
    if wrt is None:
        return reals
    items = ([w.strip() for w in wrt.split(",") if w.strip()] if isinstance(wrt, str)
             else [str(w).strip() for w in wrt])
    out: list[str] = []
    for w in items:
        if w.isdigit():
            if int(w) >= len(params):
                raise DiffError(None, f"wrt index {w} is out of range: '{sig.name}' has "
                                      f"{len(params)} parameters")
            p = params[int(w)]
        else:
            base = w.split("[", 1)[0].strip()
            p = next((q for q in params if q.name == base), None)
            if p is None:
                raise DiffError(None, f"wrt names '{base}', which is not a parameter of "
                                      f"'{sig.name}' (parameters: "
                                      f"{', '.join(q.name for q in params)})")
        if not p.differentiable:
            raise DiffError(None, f"cannot differentiate with respect to '{p.name}' of type "
                                  f"{p.c_type()}: only float/double scalars and arrays are "
                                  "differentiable")
        if p.name not in out:
            out.append(p.name)
    if not out:
        raise DiffError(None, "wrt is empty")
    return tuple(out)


class Compiled:
    """A compiled derivative of one function: ``source`` (the generated C++), ``wrt``, and its
    kernel; :class:`Gradient` and the forward-mode callables (:mod:`torchclad.bridge.forward`)
    are ones.

    ``derivative`` is the Derivative-like signature of the build (``module``) whose functions
    run; ``wrt`` defaults to its ``wrt``; ``code`` is ``source`` when known, else
    ``regenerate = (source, name, wrt, filename, clang args)`` says how the engine makes it.
    """

    def __init__(self, derivative: Any, module: Any, *, wrt: Any = None, code: str | None = None,
                 regenerate: tuple | None = None, debug: bool = False):
        from torchclad.bridge.kernel import Kernel

        self.derivative = derivative
        self._k = Kernel(derivative, module)
        self.wrt: tuple[str, ...] = tuple(derivative.wrt if wrt is None else wrt)
        self._code = code if code is not None or regenerate else getattr(derivative, "code", "")
        self._regenerate = regenerate
        self.debug = debug

    @property
    def kernel(self) -> Any:
        return self._k

    @property
    def name(self) -> str:
        return self._k.name

    @property
    def source(self) -> str:
        if self._code is None:
            from torchclad import engine

            text, name, wrt, filename, args = self._regenerate
            self._code = engine.differentiate(text, name, wrt, filename=filename,
                                              options=engine.Options(extra_args=args)).code
        return self._code

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
        mem = self._memory()
        scalar, values, bufs = self._arguments(args, mem)
        grad_outputs = dict(grad_outputs or {})
        seed = 1.0
        if k.seeded and "return" in grad_outputs:
            seed = float(grad_outputs.pop("return"))
        adjoints: dict[str, torch.Tensor] = {}
        for w in k.adjoints:
            p = k.by_name[w]
            if p.pointer and w not in bufs:
                adjoints[w] = None            # a null pointer's adjoint is null too
            else:
                adjoints[w] = mem.zeros(bufs[w].shape if p.pointer else (), k.dtype_of(p, scalar))
        for key, g in grad_outputs.items():
            p = k.by_name.get(key)
            if key not in adjoints or adjoints[key] is None or \
                    not (p.pointer or getattr(p, "reference", False)):
                arrays = [w for w in k.adjoints if k.by_name[w].pointer or
                          getattr(k.by_name[w], "reference", False)]
                raise ValueError(
                    f"{k.name}: grad_outputs[{key!r}]: expected one of the differentiated arrays "
                    f"or reference parameters {arrays}" + (" or 'return'" if k.seeded else "")
                )
            g = torch.as_tensor(g)
            if g.numel() != adjoints[key].numel():
                raise ValueError(
                    f"{k.name}: grad_outputs[{key!r}] has {g.numel()} element(s), expected "
                    f"{adjoints[key].numel()} (the shape of argument '{key}', {tuple(adjoints[key].shape)})"
                )
            adjoints[key].copy_(g.detach().reshape(adjoints[key].shape))

        call = values + ([seed] if k.seeded else []) + [
            0 if adjoints[w] is None else adjoints[w].data_ptr() for w in k.adjoints]
        if self.debug:
            self._debug_run(scalar, values, bufs, call, adjoints)
        else:
            k.binding("pullback", scalar)(*call)

        out = []
        for w in self.wrt:
            p = k.by_name[w]
            out.append(adjoints[w] if p.pointer else adjoints[w].item())
        return tuple(out)

    def _memory(self):
        from torchclad.bridge import guard, memory

        return guard.GUARDED if self.debug else memory.PLAIN

    def _arguments(self, args: tuple, mem: Any) -> tuple[str, list, dict]:
        return bind_args(self._k, args, mem)

    def _debug_run(self, scalar: str, values: list, bufs: dict, call: list, adjoints: dict):
        """A debug build: the user's own function first, on copies (a fault there is reported
        at their source line), then the pullback; a fault names the array it hit."""
        from torchclad.bridge import guard
        from torchclad.toolchain.clib import KernelFault

        k = self._k
        mem = self._memory()
        scratch = {n: mem.copy(t) for n, t in bufs.items()}
        pos = {p.name: i for i, p in enumerate(k.params)}
        first = list(values)
        for n, t in scratch.items():
            first[pos[n]] = t.data_ptr()
        user_file = self._regenerate[3] if self._regenerate else getattr(
            self.derivative, "filename", "kernel.cpp")
        for kind, argv, arrays, stage in (
                ("", first, scratch, "the function"),
                ("pullback", call, {**bufs, **{f"d:{w}": a for w, a in adjoints.items()}},
                 "the pullback (generated)")):
            try:
                k.binding(kind, scalar)(*argv)
            except KernelFault as f:
                labels = {(f"'{n}'" if not n.startswith("d:") else
                           f"the gradient of '{n[2:]}'"): t for n, t in arrays.items()}
                raise guard.explain(f, labels, op=f"{k.name} (debug build)",
                                    user_file=user_file, stage=stage) from None


def bind_args(k: Any, args: tuple, mem: Any = None) -> tuple[str, list, dict]:
    """``(scalar type, the kernel's arguments, {param: buffer})`` for calling kernel ``k``'s
    bindings with ``args``: every array copied into ``mem`` (default: plain memory; the
    kernel may write to outputs, the caller's tensors stay untouched), None for a pointer
    passed as nullptr, scalars converted. Wrong arguments raise with what was expected."""
    import torch

    from torchclad.bridge.kernel import describe

    if mem is None:
        from torchclad.bridge import memory

        mem = memory.PLAIN
    if len(args) != len(k.params):
        names = ", ".join(p.name for p in k.params)
        raise TypeError(f"{k.name}({names}) takes {len(k.params)} argument(s), got "
                        f"{len(args)}")
    tensors: dict[str, torch.Tensor] = {}
    for p, a in zip(k.params, args):
        if p.pointer and a is None:
            continue                      # a null pointer (its adjoint is null too)
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
        if p.pointer and a is None:
            values.append(0)
        elif p.pointer:
            t = tensors[p.name]
            k.check_tensor(p, t, scalar)
            bufs[p.name] = mem.copy(t.detach())
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
    if isinstance(a, (str, bytes)) and p.base in ("char", "unsigned char"):
        # a C string: its bytes and the terminating NUL
        data = a.encode() if isinstance(a, str) else a
        dtype = torch.int8 if p.base == "char" else torch.uint8
        return torch.tensor(list(data) + [0], dtype=torch.uint8).view(dtype)
    raise TypeError(
        f"{k.name}: argument '{p.name}' is a pointer ({p.base}*); expected a torch tensor "
        f"(or numpy array{', or a str' if p.base == 'char' else ''}), got {describe(a)}"
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
