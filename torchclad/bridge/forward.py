"""Forward mode and second order from Python, like Clad's ``clad::differentiate``,
``clad::jacobian`` and ``clad::hessian``::

    d = torchclad.differentiate(src, "f", "x")     # d.source: the generated f_darg0
    d(2.0, 3.0)                                    # df/dx at (2, 3), a float
    J = torchclad.jacobian(src, "g", "x, y")(x, y, out)    # outputs x inputs
    H = torchclad.hessian(src, "f", "x, y")(2.0, 3.0)      # inputs x inputs

``differentiate`` runs the generated ``f_darg<k>`` (or ``f_pushforward`` with a unit tangent);
``jacobian`` one ``f_pushforward`` per input element (a column each); ``hessian`` one
``f_pullback_pushforward`` -- forward mode over the generated pullback -- per input element.
Arrays are flattened in ``wrt`` order; rows of a Jacobian are the return value (non-void
functions) followed by the output arrays in parameter order. Inputs are never modified.
"""

from __future__ import annotations

import re
from typing import Any

from torchclad.bridge.gradient import Compiled, bind_args

__all__ = ["Differential", "Jacobian", "Hessian", "differentiate", "jacobian", "hessian"]


def _derive(source: str, name: str, wrt: Any, modes: tuple):
    from torchclad import engine, toolchain

    d = engine.differentiate(source, name, wrt, modes=modes)
    return d, toolchain.load(d, native=True)


def differentiate(source: str, name: str, arg: Any) -> "Differential":
    """The derivative of ``name`` w.r.t. one parameter, like ``clad::differentiate(f, arg)``.

    ``arg``: a parameter name or index, or one element of an array parameter (``"x[2]"``).
    """
    text = str(arg).strip()
    m = re.fullmatch(r"(\w+)\s*\[\s*(\d+)\s*\]", text)
    element = int(m.group(2)) if m else None
    base = m.group(1) if m else text
    if "," in base or not base:
        raise ValueError(f"differentiate: expected one parameter (a name, an index or "
                         f"'x[k]'), got {arg!r}; for several use torchclad.jacobian")
    d, module = _derive(source, name, base, ("forward",))
    return Differential(d, module, element)


def jacobian(source: str, name: str, wrt: Any = None) -> "Jacobian":
    """The Jacobian of ``name`` (its result and output arrays) w.r.t. ``wrt`` (Clad's string,
    a list, or None: every floating parameter but the output arrays)."""
    d, module = _derive(source, name, wrt, ("forward",))
    if wrt is None:
        inputs = tuple(w for w in d.wrt if w not in d.outputs) or d.wrt
        if inputs != d.wrt:
            d, module = _derive(source, name, list(inputs), ("forward",))
    return Jacobian(d, module)


def hessian(source: str, name: str, wrt: Any = None) -> "Hessian":
    """The Hessian of ``name``'s floating result w.r.t. ``wrt`` (None: every floating
    parameter), by forward mode over the generated pullback."""
    d, module = _derive(source, name, wrt, ("second",))
    return Hessian(d, module)


class _Forward(Compiled):
    """One compiled forward-mode derivative, with a call of its pushforward."""

    def __repr__(self) -> str:
        return f"<torchclad.{type(self).__name__} of {self.kernel.name} wrt ({', '.join(self.wrt)})>"

    def _push(self, args: tuple, direction: dict) -> tuple:
        """Run f_pushforward with the tangent ``direction[name]`` (a number or tensor; zero
        where missing) on each tangent parameter: (the result's tangent or None, {output:
        its tangent})."""
        import torch

        k = self.kernel
        scalar, values, bufs = bind_args(k, args)
        tangents: dict = {}
        call = list(values)
        for w in self.derivative.tangents:
            p = k.by_name[w]
            if p.pointer:
                t = torch.zeros_like(bufs[w])
                if w in direction:
                    t.copy_(torch.as_tensor(direction[w], dtype=t.dtype).reshape(t.shape))
                tangents[w] = t
                call.append(t.data_ptr())
            else:
                call.append(float(direction.get(w, 0.0)))
        out = k.binding("pushforward", scalar)(*call)
        ret = None if k.void else float(out[1])
        return ret, {w: tangents[w] for w in self.derivative.outputs}

    def _columns(self, args: tuple):
        """(wrt name, element index or None, its size) of every input column, in order."""
        _, _, bufs = bind_args(self.kernel, args)
        for w in self.wrt:
            if self.kernel.by_name[w].pointer:
                n = bufs[w].numel()
                for j in range(n):
                    yield w, j, bufs[w]
            else:
                yield w, None, None

    @staticmethod
    def _unit(w: str, j, buf) -> dict:
        if j is None:
            return {w: 1.0}
        e = buf.new_zeros(buf.numel())
        e[j] = 1
        return {w: e}

    def _dtype(self, args: tuple):
        from torchclad.bridge.kernel import BASE_DTYPE

        scalar, _, _ = bind_args(self.kernel, args)
        return BASE_DTYPE[scalar]


class Differential(_Forward):
    """``clad::differentiate``: call it like the function; returns the derivative w.r.t. the
    one parameter -- a float for a non-void function (a tensor like the array for a whole
    array parameter), the output arrays' tangents for a void one. ``tangent=`` gives a
    direction instead of the unit one (a number, or a tensor for an array parameter)."""

    def __init__(self, derivative: Any, module: Any, element: "int | None" = None):
        super().__init__(derivative, module)
        self.arg = derivative.wrt[0]
        self.element = element
        p = self.kernel.by_name[self.arg]
        if element is not None and not p.pointer:
            raise ValueError(f"differentiate: '{self.arg}[{element}]' indexes a scalar "
                             f"parameter ({p.base} {self.arg}); name it without an index")

    def __call__(self, *args: Any, tangent: Any = None):
        import torch

        k = self.kernel
        p = k.by_name[self.arg]
        if not p.pointer:
            if tangent is None and "darg" in self.derivative.kinds:
                scalar, values, _ = bind_args(k, args)
                return float(k.binding("darg", scalar)(*values))
            return self._result(self._push(args, {self.arg: 1.0 if tangent is None
                                                  else float(tangent)}))
        if tangent is not None:
            return self._result(self._push(args, {self.arg: tangent}))
        cols = [c for c in self._columns(args) if c[0] == self.arg]
        if self.element is not None:
            if not 0 <= self.element < len(cols):
                raise IndexError(f"{k.name}: '{self.arg}[{self.element}]' is out of range: "
                                 f"'{self.arg}' has {len(cols)} element(s)")
            return self._result(self._push(args, self._unit(*cols[self.element])))
        if k.void:
            raise TypeError(f"{k.name} is void: its derivative w.r.t. the whole array "
                            f"'{self.arg}' is a Jacobian; use torchclad.jacobian, or name one "
                            f"element ('{self.arg}[0]'), or pass tangent=")
        vals = [self._push(args, self._unit(*c))[0] for c in cols]
        buf = cols[0][2] if cols else torch.zeros(0, dtype=self._dtype(args))
        return torch.tensor(vals, dtype=buf.dtype).reshape(buf.shape)

    def _result(self, pushed: tuple):
        ret, outs = pushed
        if not self.kernel.void:
            return ret
        vals = tuple(outs.values())
        return vals[0] if len(vals) == 1 else vals


class Jacobian(_Forward):
    """``clad::jacobian``: call it like the function; returns the (outputs x inputs) matrix
    of the derivatives of the result (if any) and the output arrays, flattened, w.r.t. the
    ``wrt`` parameters, flattened, in order."""

    def __call__(self, *args: Any):
        import torch

        cols = []
        for col in self._columns(args):
            ret, outs = self._push(args, self._unit(*col))
            parts = ([torch.tensor([ret], dtype=self._dtype(args))] if ret is not None else []) + \
                [t.reshape(-1) for t in outs.values()]
            cols.append(torch.cat(parts) if parts else torch.zeros(0, dtype=self._dtype(args)))
        if not cols:
            return torch.zeros(0, 0, dtype=self._dtype(args))
        return torch.stack(cols, dim=1)


class Hessian(_Forward):
    """``clad::hessian``: call it like the function; returns the (inputs x inputs) matrix of
    second derivatives of its floating result w.r.t. the ``wrt`` parameters, flattened."""

    def __init__(self, derivative: Any, module: Any):
        super().__init__(derivative, module)
        if self.kernel.void or not self.kernel.is_float(self.kernel.ret):
            raise TypeError(f"hessian: '{self.kernel.name}' returns "
                            f"{derivative.return_type.base}; a Hessian is of a function "
                            "returning one floating value (write a scalar loss function)")

    def __call__(self, *args: Any):
        import torch

        cols = [self._column(args, self._unit(*c)) for c in self._columns(args)]
        if not cols:
            return torch.zeros(0, 0, dtype=self._dtype(args))
        return torch.stack(cols, dim=1)

    def _column(self, args: tuple, direction: dict):
        """One f_pullback_pushforward call: the adjoints' tangents along ``direction``."""
        import torch

        k, d = self.kernel, self.derivative
        scalar, values, bufs = bind_args(k, args)
        adj = {w: torch.zeros_like(bufs[w]) if k.by_name[w].pointer else
               torch.zeros((), dtype=k.dtype_of(k.by_name[w], scalar)) for w in k.adjoints}
        dadj = {w: torch.zeros_like(t) for w, t in adj.items()}
        call = list(values) + [1.0] + [adj[w].data_ptr() for w in k.adjoints]
        keep = []                            # the tangent buffers, alive during the call
        n = len(k.params)
        for i in d.second_mask:
            if i < n:
                p = k.params[i]
                if p.pointer:
                    t = torch.zeros_like(bufs[p.name])
                    if p.name in direction:
                        t.copy_(direction[p.name].reshape(t.shape))
                    call.append(t.data_ptr())
                    keep.append(t)
                else:
                    call.append(float(direction.get(p.name, 0.0)))
            elif i == n:
                call.append(0.0)             # the seed's tangent
            else:
                call.append(dadj[k.adjoints[i - n - 1]].data_ptr())
        k.binding("pullback_pushforward", scalar)(*call)
        return torch.cat([dadj[w].reshape(-1) for w in self.wrt])
