"""The argument checks of the :mod:`torchclad.nn` modules: what they accept, and messages that
name the module, what was expected, what arrived and the fix."""

from __future__ import annotations

from typing import Any

import torch

from torchclad.bridge.kernel import dtype_name

__all__ = ["check_input", "check_params_dtype", "params_dtype", "check_int32", "dtype_name",
           "check_positive_int", "config_value", "factory_kwargs", "param", "usual", "INT32_MAX"]

#: the most elements the kernels address (they index with 32-bit ints)
INT32_MAX = 2**31 - 1


def check_input(owner: str, x: Any, *, name: str = "input", dtype: torch.dtype | None = None,
                min_dim: int = 0, max_dim: int | None = None, what: str = "") -> None:
    """A floating CPU tensor (of ``dtype`` if given) with ``min_dim``..``max_dim`` dims."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{owner}: {name} must be a torch.Tensor, got {type(x).__name__}")
    if x.device.type != "cpu":
        raise ValueError(f"{owner}: {name} is on {x.device}; torchclad kernels run on the CPU only "
                         "(move it with .cpu())")
    if dtype is not None and x.dtype != dtype:
        raise TypeError(f"{owner}: {name} must be a {dtype_name(dtype)} tensor (the dtype of the "
                        f"module's parameters), got {dtype_name(x.dtype)}; convert the input with "
                        f".to(torch.{dtype_name(dtype)}) or the module with .to(...)")
    if x.dtype not in (torch.float32, torch.float64):
        raise TypeError(f"{owner}: {name} must be a float32 or float64 tensor, got "
                        f"{dtype_name(x.dtype)}")
    if x.dim() < min_dim or (max_dim is not None and x.dim() > max_dim):
        want = (f"{min_dim}" if max_dim == min_dim else
                f"at least {min_dim}" if max_dim is None else f"{min_dim} to {max_dim}")
        unit = "dimension" if (max_dim if max_dim is not None else min_dim) == 1 else "dimensions"
        raise ValueError(f"{owner}: {name} must have {want} {unit}{what}, got shape "
                         f"{tuple(x.shape)} ({x.dim()}-d)")


def check_params_dtype(owner: str, *params: Any) -> torch.dtype:
    """The common floating dtype of a module's parameters (float32 or float64), on the CPU.

    ``params``: tensors, or ``(name, tensor)`` pairs (``named_parameters()``) so that the messages
    name the parameter; ``None`` entries (an absent bias) are skipped."""
    dtype = first = None
    for item in params:
        name, p = item if isinstance(item, tuple) else (None, item)
        if p is None:
            continue
        what = f"parameter '{name}' is" if name else "parameters are"
        if p.device.type != "cpu":
            raise ValueError(f"{owner}: {what} on {p.device}; torchclad kernels run on the CPU "
                             "only (move the module with .cpu())")
        if p.dtype not in (torch.float32, torch.float64):
            raise TypeError(f"{owner}: {what} {dtype_name(p.dtype)}; parameters must be float32 "
                            "or float64 (convert the module with .float() or .double())")
        if dtype is None:
            dtype, first = p.dtype, name
        elif p.dtype != dtype:
            names = f" ('{first}' and '{name}')" if first and name else ""
            raise TypeError(f"{owner}: parameters mix {dtype_name(dtype)} and "
                            f"{dtype_name(p.dtype)}{names}; convert the module with .to(dtype)")
    return dtype


_FLOATING = (torch.float32, torch.float64)


def params_dtype(owner: str, *named: tuple) -> torch.dtype | None:
    """:func:`check_params_dtype` for ``(name, tensor)`` pairs, with a cheap path for the usual
    case (every parameter present, on the CPU, of one floating dtype); anything else goes to the
    full check, which explains what is wrong."""
    dtype = None
    for _, p in named:
        if p is None or not p.is_cpu or (dtype is not None and p.dtype is not dtype):
            return check_params_dtype(owner, *named)
        dtype = p.dtype
    if dtype not in _FLOATING:
        return check_params_dtype(owner, *named)
    return dtype


def param(module: torch.nn.Module, name: str) -> Any:
    """``getattr(module, name)`` for a parameter (or None), read from ``module._parameters``.

    ``torch.nn.Module`` finds a parameter by ``__getattr__``, after the ordinary lookup has
    failed with an AttributeError: ~1 us a read, several per call of a small layer. A name not
    in ``_parameters`` (a parametrization's property, a plain attribute) is read by getattr."""
    ps = module._parameters
    return ps[name] if name in ps else getattr(module, name)


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def usual(x: Any, *params: Any) -> bool:
    """The usual call, in a few attribute reads: ``x`` a plain (no subclass) float32 or float64
    CPU tensor and every parameter (None: absent) one of its dtype on the CPU, outside
    torch.compile. A module's fast lane; anything else takes its full checks, which explain."""
    if type(x) not in _PLAIN or x.dtype not in _FLOATING or not x.is_cpu:
        return False
    dtype = x.dtype
    for p in params:
        if p is not None and (p.dtype is not dtype or not p.is_cpu):
            return False
    return not torch.compiler.is_compiling()


def check_int32(owner: str, what: str, n: int) -> None:
    """The kernels index with 32-bit ints: refuse sizes they cannot address."""
    if isinstance(n, int) and n > INT32_MAX:
        raise ValueError(f"{owner}: {what} is {n}, above the kernels' limit of 2**31 - 1 "
                         "elements; split the batch")


def config_value(owner: str, config, name: str, default=None, *, required: bool = True):
    """``config.<name>`` (or ``config[name]`` for a dict), with an error naming what is missing."""
    if isinstance(config, dict):
        if name in config:
            return config[name]
    elif hasattr(config, name):
        return getattr(config, name)
    if required and default is None:
        raise TypeError(f"{owner}: config has no {name!r}; expected an object with n_embd, "
                        f"n_head, block_size and bias (like nanoGPT's GPTConfig), got "
                        f"{type(config).__name__}")
    return default


def check_positive_int(owner: str, name: str, v) -> int:
    """``v``, checked to be a positive int (not a bool)."""
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        raise ValueError(f"{owner}: {name} must be a positive int, got {v!r}")
    return v


def factory_kwargs(owner: str, device, dtype) -> dict:
    """``device`` / ``dtype`` arguments of a constructor, checked for what the kernels run on."""
    if device is not None and torch.device(device).type != "cpu":
        raise ValueError(f"{owner}: device={device!r}; torchclad kernels run on the CPU only")
    if dtype is not None and dtype not in (torch.float32, torch.float64):
        raise TypeError(f"{owner}: dtype must be torch.float32 or torch.float64, got {dtype}")
    return {"device": device, "dtype": dtype}
