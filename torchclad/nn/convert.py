"""``torchclad.nn.convert(model)``: swap supported torch.nn submodules for torchclad's, in place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch

from .activation import GELU, Softmax
from .linear import Linear
from .loss import CrossEntropyLoss
from .normalization import LayerNorm
from .sparse import Embedding

__all__ = ["convert", "Replacement", "ConvertReport"]


@dataclass(frozen=True)
class Replacement:
    """One swapped submodule: its qualified name in the model, old and new class names."""

    name: str
    before: str
    after: str

    def __str__(self) -> str:
        return f"{self.name}: {self.before} -> {self.after}"


class ConvertReport(list):
    """What :func:`convert` did: a list of :class:`Replacement` (in ``named_modules`` order).

    ``skipped`` lists ``(name, reason)`` for submodules of a supported type left as they were
    (an option torchclad does not support, a dtype or device its kernels do not run on, a
    subclass).
    """

    def __init__(self, replaced=(), skipped=()):
        super().__init__(replaced)
        self.skipped: list[tuple[str, str]] = list(skipped)

    @property
    def replaced(self) -> list[Replacement]:
        return list(self)

    def __str__(self) -> str:
        lines = [f"torchclad.nn.convert: replaced {len(self)} module(s)"]
        lines += [f"  {r}" for r in self]
        if self.skipped:
            lines.append(f"skipped {len(self.skipped)}:")
            lines += [f"  {name}: {why}" for name, why in self.skipped]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"ConvertReport(replaced={list(self)!r}, skipped={self.skipped!r})"


def _child_slots(parent: torch.nn.Module) -> dict:
    """``parent``'s direct submodules by name, as the mutable dict that holds them.

    ``named_children()`` yields a module registered under two names once, and ``setattr`` runs
    torch's module registration hooks; convert must see and replace every name, and nothing
    else, so this returns torch.nn.Module's private ``_modules``, here only."""
    return parent._modules


def _params_ok(m: torch.nn.Module) -> Optional[str]:
    """Why ``m``'s parameters cannot go to torchclad kernels, or None."""
    for name, p in m.named_parameters(recurse=False):
        if p.device.type != "cpu":
            return f"parameter {name!r} is on {p.device} (torchclad runs on the CPU)"
        if p.dtype not in (torch.float32, torch.float64):
            return f"parameter {name!r} is {p.dtype} (torchclad supports float32 and float64)"
    return None


def _dtype(m: torch.nn.Module):
    p = next(m.parameters(recurse=False), None)
    return None if p is None else p.dtype


def _share(new: torch.nn.Module, old: torch.nn.Module, names: tuple) -> torch.nn.Module:
    """Give ``new`` the very Parameter objects of ``old`` (optimizers and ties keep working)."""
    for n in names:
        setattr(new, n, getattr(old, n))
    new.train(old.training)
    return new


def _linear(m: torch.nn.Linear):
    new = Linear(m.in_features, m.out_features, bias=m.bias is not None, dtype=_dtype(m))
    return _share(new, m, ("weight", "bias"))


def _layernorm(m: torch.nn.LayerNorm):
    new = LayerNorm(m.normalized_shape, eps=m.eps, elementwise_affine=m.elementwise_affine,
                    bias=m.bias is not None, dtype=_dtype(m))
    return _share(new, m, ("weight", "bias"))


def _gelu(m: torch.nn.GELU):
    return _share(GELU(approximate=m.approximate), m, ())


def _softmax(m: torch.nn.Softmax):
    return _share(Softmax(dim=m.dim), m, ())


def _embedding_why(m: torch.nn.Embedding) -> Optional[str]:
    for name, default in (("padding_idx", None), ("max_norm", None),
                          ("scale_grad_by_freq", False), ("sparse", False)):
        if getattr(m, name) != default:
            return f"{name}={getattr(m, name)!r} is not supported"
    return None


def _embedding(m: torch.nn.Embedding):
    new = Embedding(m.num_embeddings, m.embedding_dim, dtype=_dtype(m))
    return _share(new, m, ("weight",))


def _crossentropy_why(m: torch.nn.CrossEntropyLoss) -> Optional[str]:
    if m.weight is not None:
        return "class weights (weight=...) are not supported"
    if m.label_smoothing != 0.0:
        return f"label_smoothing={m.label_smoothing} is not supported"
    return None


def _crossentropy(m: torch.nn.CrossEntropyLoss):
    new = CrossEntropyLoss(ignore_index=m.ignore_index, reduction=m.reduction)
    return _share(new, m, ())


# exact type -> (why not, or None; build the replacement)
_RULES: dict[type, tuple[Callable, Callable]] = {
    torch.nn.Linear: (_params_ok, _linear),
    torch.nn.LayerNorm: (_params_ok, _layernorm),
    torch.nn.GELU: (lambda m: None, _gelu),
    torch.nn.Softmax: (lambda m: None, _softmax),
    torch.nn.Embedding: (lambda m: _embedding_why(m) or _params_ok(m), _embedding),
    torch.nn.CrossEntropyLoss: (_crossentropy_why, _crossentropy),
}


def convert(model: torch.nn.Module) -> ConvertReport:
    """Replace, in place, every submodule of ``model`` torchclad has a kernel for.

    Swapped (exact types): ``torch.nn.Linear``, ``LayerNorm``, ``GELU``, ``Softmax``,
    ``Embedding``, ``CrossEntropyLoss``. The torchclad module gets the original's configuration
    and its very ``Parameter`` objects (not copies): the weights are the same, tied weights stay
    tied, and an optimizer built before the conversion keeps updating them. Training mode is
    kept; hooks registered on the old submodule are not carried over. A module used at several
    places is replaced by one torchclad module at all of them.

    Submodules of those types that torchclad cannot take (unsupported options, non-CPU or
    non-float32/64 parameters, subclasses) stay and are listed in ``report.skipped``.
    Returns a :class:`ConvertReport`, a list of :class:`Replacement`.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"convert: model must be a torch.nn.Module, got {type(model).__name__}")
    if type(model) in _RULES:
        raise TypeError(
            f"convert: the model itself is a {type(model).__module__}.{type(model).__name__}; "
            "convert() swaps submodules in place, so the root cannot be replaced. Wrap it "
            "(torch.nn.Sequential(model)) or build the torchclad.nn module directly")
    done: dict[int, torch.nn.Module] = {}
    replaced: list[Replacement] = []
    skipped: list[tuple[str, str]] = []
    seen: set[int] = set()

    def visit(parent: torch.nn.Module, prefix: str) -> None:
        if id(parent) in seen:
            return
        seen.add(id(parent))
        slots = _child_slots(parent)
        for name, child in list(slots.items()):
            if child is None:
                continue
            qual = f"{prefix}{name}"
            if id(child) in done:
                slots[name] = done[id(child)]
                continue
            rule = _RULES.get(type(child))
            if rule is None:
                for base in _RULES:
                    if isinstance(child, base):
                        skipped.append((qual, f"subclass {type(child).__name__} of "
                                              f"torch.nn.{base.__name__} is not converted"))
                        break
                visit(child, qual + ".")
                continue
            why_not, build = rule
            why = why_not(child)
            if why is not None:
                skipped.append((qual, why))
                continue
            new = build(child)
            done[id(child)] = new
            slots[name] = new
            replaced.append(Replacement(qual, f"torch.nn.{type(child).__name__}",
                                        f"torchclad.nn.{type(new).__name__}"))

    visit(model, "")
    return ConvertReport(replaced, skipped)
