"""GPT-2 (nanoGPT / llm.c ``train_gpt2.py`` naming), in two modes.

- ``GPT2(config)``: modular. Each layer is a :mod:`torchclad.nn` module, so autograd chains the
  engine-generated reverse sweeps of the layer kernels (and matmul's custom derivative).
- ``GPT2(config, fused=True)``: the whole forward is one C++ function, ``gpt2_forward`` in
  ``csrc/kernels/gpt2.cpp``, and the whole backward is one generated reverse sweep of it. The
  parameters live in one flat buffer (each ``Parameter`` is a view of it, so ``state_dict``,
  optimizers and ``load_state_dict`` see ordinary parameters) and the activations in a
  preallocated arena sized from (config, B, T), reused from step to step.

Both modes have the same modules, ``state_dict`` keys and outputs; a plain-PyTorch GPT-2 with the
same names (:class:`torchclad.testing.ReferenceGPT2`, nanoGPT's ``GPT``) loads either's
``state_dict`` and vice versa. ``lm_head.weight`` is ``transformer.wte.weight`` (tied).
"""

from __future__ import annotations

import math
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Optional

import torch

from . import _builtin
from .attention import CausalSelfAttention
from .linear import Linear
from .loss import CrossEntropyLoss
from .mlp import MLP
from .normalization import LayerNorm
from .sparse import Embedding

__all__ = ["GPT2Config", "Block", "GPT2", "TokenIndexError", "param_layout", "arena_size"]



@dataclass
class GPT2Config:
    """GPT-2 hyperparameters; the defaults are GPT-2 small (124M) with the vocabulary padded to
    50304 (a multiple of 64), as in nanoGPT / llm.c."""

    block_size: int = 1024
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    bias: bool = True


class TokenIndexError(IndexError, ValueError):
    """A token id (idx or target) outside the vocabulary. Both an ``IndexError`` (like
    ``torch.nn.Embedding``'s) and a ``ValueError`` (a bad argument value)."""


def _check_config(config: Any) -> None:
    for name in ("block_size", "vocab_size", "n_layer", "n_head", "n_embd"):
        v = getattr(config, name, None)
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"GPT2: config.{name} must be a positive int, got {v!r}")
    if config.n_embd % config.n_head != 0:
        raise ValueError(f"GPT2: n_embd ({config.n_embd}) must be divisible by n_head "
                         f"({config.n_head}): each head gets n_embd // n_head channels")


class Block(torch.nn.Module):
    """One transformer block: ``x + attn(ln_1(x))``, then ``x + mlp(ln_2(x))`` (pre-norm)."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _builtin.residual_op(x, self.attn(self.ln_1(x)))
        return _builtin.residual_op(x, self.mlp(self.ln_2(x)))


class GPT2(torch.nn.Module):
    """GPT-2 language model; ``forward(idx, targets=None) -> (logits, loss)`` as in nanoGPT.

    ``idx``: (B, T) int64 token ids, ``T <= block_size``, each in ``[0, vocab_size)``.
    With ``targets`` ((B, T), entries in ``[0, vocab_size)`` or -1 to ignore a position):
    ``logits`` (B, T, vocab_size) and ``loss``, the mean cross-entropy over the positions not
    ignored. Without: the logits of the last position only, (B, 1, vocab_size), and ``None``.

    ``fused=True`` runs the whole model as one C++ function with one generated backward (see the
    module docstring); parameters, state_dict and results are the same as ``fused=False``.
    Initialisation as GPT-2: weights N(0, 0.02), biases 0, LayerNorm 1/0, and the residual
    projections (``*.c_proj.weight``) N(0, 0.02 / sqrt(2 n_layer)).
    """

    def __init__(self, config: GPT2Config, fused: bool = False) -> None:
        super().__init__()
        _check_config(config)
        self.config = config
        self.fused = bool(fused)
        self.transformer = torch.nn.ModuleDict(dict(
            wte=Embedding(config.vocab_size, config.n_embd),
            wpe=Embedding(config.block_size, config.n_embd),
            h=torch.nn.ModuleList(Block(config) for _ in range(config.n_layer)),
            ln_f=LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied: one Parameter, two names
        self.loss_fn = CrossEntropyLoss(ignore_index=-1)
        self.apply(_init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))
        # llm.c / Hugging Face checkpoints carry the causal mask as a buffer "attn.bias"
        # (and "attn.masked_bias"); it is not state here: drop it when loading.
        self.register_load_state_dict_pre_hook(_drop_mask_buffers)
        self._fused: Optional[_Fused] = _Fused(config) if self.fused else None
        if self._fused is not None:
            self._fused.pack(self)

    # ---- nanoGPT conveniences

    def get_num_params(self, non_embedding: bool = True) -> int:
        """Number of parameters (the tied lm_head counted once); without wpe by default."""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n -= self.transformer.wpe.weight.numel()
        return n

    def extra_repr(self) -> str:
        return f"fused={self.fused}"

    # ---- forward

    def forward(self, idx: torch.Tensor, targets: Optional[torch.Tensor] = None):
        B, T = self._check_inputs(idx, targets)
        # the parameters' dtype and device, named here rather than by the first kernel's op
        _builtin.check_params_dtype("GPT2", *self.named_parameters())
        if self._fused is not None:
            return self._fused.forward(self, idx, targets)
        tr = self.transformer
        idx64 = idx.to(torch.int64).contiguous()
        tie = _TiedGrad.for_call(self, idx64)
        if tie is None:
            x = _builtin.encoder_op(idx64, tr.wte.weight, tr.wpe.weight)
        else:
            x = _TiedEncoder.apply(idx64, tr.wte.weight, tr.wpe.weight, tie)
        for block in tr.h:
            x = block(x)
        x = tr.ln_f(x)
        head = self.lm_head if tie is None else tie.head
        if targets is None:
            return head(x[:, [-1], :]), None
        logits = head(x)
        loss = self.loss_fn(logits.reshape(B * T, self.config.vocab_size), targets.reshape(B * T))
        return logits, loss

    def _check_inputs(self, idx: Any, targets: Any) -> tuple[int, int]:
        cfg = self.config
        if not isinstance(idx, torch.Tensor):
            raise TypeError(f"GPT2: idx must be a (B, T) tensor of token ids, got "
                            f"{type(idx).__name__}")
        if idx.dtype not in (torch.int64, torch.int32) or idx.dim() != 2:
            raise TypeError(f"GPT2: idx must be a (B, T) int64 tensor of token ids, got a tensor "
                            f"of dtype {_builtin.dtype_name(idx.dtype)} and shape {tuple(idx.shape)}")
        if idx.device.type != "cpu":
            raise ValueError(f"GPT2: idx is on {idx.device}; torchclad kernels run on the CPU only")
        B, T = idx.shape
        if T > cfg.block_size:
            raise ValueError(f"GPT2: cannot forward a sequence of length {T}, block_size is only "
                             f"{cfg.block_size}")
        if T == 0 and targets is None:
            raise ValueError("GPT2: idx has T = 0 positions; without targets the model returns "
                             "the logits of the last position, and there is none")
        # Under torch.compile the modular model's Embedding and CrossEntropyLoss check the ids
        # inside the graph (torchclad::checked_indices); a data-dependent check here would
        # break the graph. The fused model has no such op: it keeps the check (and its graph
        # break).
        eager_check = not (torch.compiler.is_compiling() and not self.fused)
        if eager_check:
            _check_ids("idx", idx, cfg.vocab_size, allow_ignore=False)
        if targets is not None:
            if (not isinstance(targets, torch.Tensor)
                    or targets.dtype not in (torch.int64, torch.int32)):
                raise TypeError("GPT2: targets must be a (B, T) int64 tensor of token ids (or -1 "
                                f"to ignore a position), got {_describe(targets)}")
            if tuple(targets.shape) != (B, T):
                raise ValueError(f"GPT2: targets has shape {tuple(targets.shape)}, expected the "
                                 f"shape of idx, {(B, T)}")
            if targets.device.type != "cpu":
                raise ValueError(f"GPT2: targets is on {targets.device}; torchclad kernels run on "
                                 "the CPU only")
            if eager_check:
                _check_ids("targets", targets, cfg.vocab_size, allow_ignore=True)
        return B, T

    # ---- sampling

    @torch.no_grad()
    def generate(self, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
                 top_k: Optional[int] = None, generator: Optional[torch.Generator] = None):
        """Append ``max_new_tokens`` sampled tokens to ``idx`` (B, T); the context is cropped to
        the last ``block_size`` tokens."""
        for _ in range(max_new_tokens):
            ctx = idx if idx.size(1) <= self.config.block_size else idx[:, -self.config.block_size:]
            logits, _ = self(ctx)
            logits = logits[:, -1, :] / max(temperature, 1e-8)
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("inf")
            nxt = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)
            idx = torch.cat((idx, nxt), dim=1)
        return idx


# ----------------------------------------------------------------------------------------------
# Modular mode: the tied embedding's gradient, accumulated in place
#
# wte is read twice, by the encoder (first layer) and by the lm_head (last). Left to autograd,
# each backward makes a (V, C) gradient of its own (the lm_head matmul's d weight, the
# encoder's scatter-add into zeros) and AccumulateGrad adds the two: two fresh 154 MB buffers
# and an add per step for GPT-2 small. Instead, the lm_head reads wte through _HeadWeight, whose
# backward hands the lm_head's d weight over (instead of to autograd), and the encoder's
# generated sweep accumulates into that very buffer: one buffer, no add. The backward runs the
# lm_head before the encoder (it is later in the graph); should the encoder's backward come
# first anyway, or the buffer not be ours to write, each returns its own gradient to autograd.


def _tie_supported() -> bool:
    op = _builtin.encoder_op
    return all(hasattr(op, a) for a in ("_run_forward", "k", "has_ret")) and not op.has_ret and \
        set(getattr(op.k, "adjoints", ())) == {"wte", "wpe", "out"}


class _TiedGrad:
    """The hand-over between one forward's lm_head and encoder backwards."""

    __slots__ = ("lock", "grad", "encoder_done", "head")
    enabled = True  # False: the two gradients go to autograd separately (the tests compare)

    def __init__(self, weight: torch.Tensor) -> None:
        self.lock = threading.Lock()
        self.grad: Optional[torch.Tensor] = None  # the lm_head's d weight, waiting
        self.encoder_done = False

        def head(x: torch.Tensor) -> torch.Tensor:
            lead = x.shape[:-1]
            w = _HeadWeight.apply(weight, self)
            out = _builtin.matmul_op(x.reshape(-1, x.shape[-1]), w, _builtin.none_tensor(weight))
            return out.reshape(*lead, weight.shape[0])

        self.head = head

    @classmethod
    def for_call(cls, model: "GPT2", idx64: torch.Tensor) -> Optional["_TiedGrad"]:
        """A hand-over for this forward, or None for the plain path (no gradient to wte, torch
        .compile or another tracer, a subclass tensor, hooks on the lm_head, untied weights)."""
        if not cls.enabled or _use_count is None or not _tie_supported():
            return None
        tr, head = model.transformer, model.lm_head
        w = tr.wte.weight
        if (head.weight is not w or head.bias is not None or not torch.is_grad_enabled()
                or not w.requires_grad or torch.compiler.is_compiling()
                or head._forward_hooks or head._forward_pre_hooks
                or torch.nn.modules.module._global_forward_hooks
                or torch.nn.modules.module._global_forward_pre_hooks):
            return None
        from torchclad.ops import _plain_call

        if not _plain_call((idx64, w, tr.wpe.weight)):
            return None
        return cls(w)


class _HeadWeight(torch.autograd.Function):
    """wte as the lm_head reads it (identity); backward: see _TiedGrad."""

    @staticmethod
    def forward(ctx, weight, tie):
        ctx.tie = tie
        return weight.view_as(weight)

    @staticmethod
    def backward(ctx, g):
        tie: _TiedGrad = ctx.tie
        if g is None:
            return None, None
        with tie.lock:
            # ours to write: a plain contiguous buffer no other tensor holds (the matmul sweep's
            # fresh d weight), and no graph being built over the backward (create_graph)
            if (not tie.encoder_done and tie.grad is None and not torch.is_grad_enabled()
                    and type(g) is torch.Tensor and g.is_contiguous() and _unshared(g)):
                tie.grad = g
                return None, None
        return g, None


class _TiedEncoder(torch.autograd.Function):
    """``encoder_forward`` (wte[idx] + wpe[t]) whose generated sweep adds wte's gradient into the
    lm_head's d weight when _HeadWeight left it (see _TiedGrad)."""

    @staticmethod
    def forward(ctx, idx64, wte, wpe, tie):
        ctx.set_materialize_grads(False)
        ctx.tie = tie
        ctx.save_for_backward(idx64, wte, wpe)
        return _builtin.encoder_op(idx64, wte, wpe)

    @staticmethod
    def backward(ctx, d_out):
        idx64, wte, wpe = ctx.saved_tensors
        tie: _TiedGrad = ctx.tie
        with tie.lock:
            d_wte, tie.grad = tie.grad, None
            tie.encoder_done = d_wte is None  # the lm_head's backward (if any) is still to come
        if d_out is None:
            return None, d_wte, None, None
        if torch.is_grad_enabled():
            raise RuntimeError(
                "torchclad::encoder_forward: double backward (a gradient of the gradient) is not "
                "supported: the engine generates first-order reverse mode only. Use "
                "create_graph=False, or torch.func / a torch implementation for higher-order "
                "derivatives.")
        op = _builtin.encoder_op
        _, rec = op._run_forward((idx64, wte, wpe), record=True)  # the tape (cheap: a gather)
        if d_wte is None:
            d_wte = torch.zeros_like(wte, memory_format=torch.contiguous_format)
        adj = {"wte": d_wte, "wpe": torch.zeros_like(wpe, memory_format=torch.contiguous_format),
               "out": d_out.to(wte.dtype).contiguous().clone()}  # the sweep zeroes its seed
        op.k.binding("reverse_sweep", rec.scalar)(
            *rec.args, *(adj[w].data_ptr() for w in op.k.adjoints), rec.tape)
        return (None, d_wte if ctx.needs_input_grad[1] else None,
                adj["wpe"] if ctx.needs_input_grad[2] else None, None)


def _describe(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"a {_builtin.dtype_name(x.dtype)} tensor of shape {tuple(x.shape)}"
    return type(x).__name__


def _check_ids(what: str, ids: torch.Tensor, vocab: int, allow_ignore: bool) -> None:
    if ids.numel() == 0:
        return
    lo, hi = int(ids.min()), int(ids.max())
    if hi >= vocab or lo < (-1 if allow_ignore else 0):
        bad = ids[(ids >= vocab) | (ids < (-1 if allow_ignore else 0))].reshape(-1)[0].item()
        allowed = f"[0, {vocab})" + (" or -1 (ignored)" if allow_ignore else "")
        raise TokenIndexError(f"GPT2: {what} contains {bad}, outside the vocabulary: token ids "
                              f"must be in {allowed} (vocab_size = {vocab})")


def _init_weights(module: torch.nn.Module) -> None:
    if isinstance(module, (Linear, torch.nn.Linear)):
        torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if module.bias is not None:
            torch.nn.init.zeros_(module.bias)
    elif isinstance(module, (Embedding, torch.nn.Embedding)):
        torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)


def _drop_mask_buffers(module, state_dict, prefix, local_metadata, strict, missing_keys,
                       unexpected_keys, error_msgs) -> None:
    for key in [k for k in state_dict if k.startswith(prefix + "transformer.h.")]:
        if key.endswith(".attn.bias") or key.endswith(".attn.masked_bias"):
            if state_dict[key].dim() == 4:  # (1, 1, block, block) mask, not a c_attn bias
                del state_dict[key]


# ----------------------------------------------------------------------------------------------
# Fused mode: layout (mirrors csrc/kernels/gpt2.cpp), kernel lookup, autograd


def param_layout(config: Any) -> list[tuple[str, tuple[int, ...], int]]:
    """``(name, shape, offset)`` of every slot of gpt2_forward's flat parameter buffer.

    Bias slots are present even with ``config.bias = False`` (then they are not parameters and
    stay zero), and one extra slot, ``lm_head.bias`` (V), is always zero: see gpt2.cpp.
    """
    C, V = config.n_embd, config.vocab_size
    shapes = [("transformer.wte.weight", (V, C)),
              ("transformer.wpe.weight", (config.block_size, C))]
    for l in range(config.n_layer):
        p = f"transformer.h.{l}."
        shapes += [(p + "ln_1.weight", (C,)), (p + "ln_1.bias", (C,)),
                   (p + "attn.c_attn.weight", (3 * C, C)), (p + "attn.c_attn.bias", (3 * C,)),
                   (p + "attn.c_proj.weight", (C, C)), (p + "attn.c_proj.bias", (C,)),
                   (p + "ln_2.weight", (C,)), (p + "ln_2.bias", (C,)),
                   (p + "mlp.c_fc.weight", (4 * C, C)), (p + "mlp.c_fc.bias", (4 * C,)),
                   (p + "mlp.c_proj.weight", (C, 4 * C)), (p + "mlp.c_proj.bias", (C,))]
    shapes += [("transformer.ln_f.weight", (C,)), ("transformer.ln_f.bias", (C,)),
               ("lm_head.bias", (V,))]
    out, off = [], 0
    for name, shape in shapes:
        out.append((name, shape, off))
        off += math.prod(shape)
    return out


def arena_size(config: Any, B: int, T: int) -> int:
    """Number of values in gpt2_forward's activation arena for a (B, T) batch (see gpt2.cpp)."""
    N, C = B * T, config.n_embd
    per_layer = 18 * N * C + 4 * N + 2 * B * config.n_head * T * T
    return N * C + config.n_layer * per_layer + N * C + 3 * N


_SFX = {torch.float32: "f32", torch.float64: "f64"}
_KERNEL = "gpt2_forward"
_kernel_module: Any = None


def fused_kernel_module() -> Any:
    """The compiled module holding ``gpt2_forward_{,reverse_forw_,reverse_sweep_}{f32,f64}``.

    ``torchclad._C``, built at install time from the registry entry in torchclad/kernels.py. If
    that extension predates the entry (an install from before it), the same unit is generated
    and compiled on first use instead (cached under ``$TORCHCLAD_CACHE_DIR``).
    """
    global _kernel_module
    if _kernel_module is not None:
        return _kernel_module
    C = _builtin._extension()
    if hasattr(C, f"{_KERNEL}_reverse_sweep_f32"):
        _kernel_module = C
        return C
    import os

    from torchclad import ad, build, kernels

    spec = next(s for s in kernels.KERNELS if s.name == _KERNEL)
    d = ad.differentiate(kernels.unit_source(spec), _KERNEL, list(spec.wrt),
                         filename=f"csrc/kernels/{spec.file}")
    lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    _kernel_module = build.load(d, extra_ldflags=[f"-L{lib}", "-ltorch_cpu", f"-Wl,-rpath,{lib}"])
    return _kernel_module


class _Fused:
    """The fused path of one GPT2: flat parameter buffer, arena pool, calls into the kernel."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self.layout = param_layout(config)
        self.total = self.layout[-1][2] + math.prod(self.layout[-1][1])
        self._reset()

    def _reset(self) -> None:
        self.flat: Optional[torch.Tensor] = None
        self.slots: list[tuple[torch.nn.Parameter, int, int]] = []  # (param, offset, numel)
        self.arenas: dict[tuple, list[torch.Tensor]] = {}
        self.scratch: dict[tuple, torch.Tensor] = {}
        # Reusable big buffers handed out to the caller (see take_shared): the flat gradient
        # buffer (d params, per dtype) and the logits (per (dtype, B, T)).
        self.grad_bufs: dict[Any, list[torch.Tensor]] = {}
        self.logits_bufs: dict[tuple, list[torch.Tensor]] = {}
        # Forward and backward may run in several threads at once (the kernels release the GIL):
        # a buffer taken from a pool belongs to one call until it is given back, and the pools
        # and the packing of the parameters change under this lock.
        self.lock = threading.RLock()

    # copy.deepcopy / pickle of the model: the buffers are rebuilt on the next forward
    def __getstate__(self) -> dict:
        return {"config": self.config}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["config"])

    # -- parameters

    def params_in_order(self) -> list[torch.nn.Parameter]:
        return [p for p, _, _ in self.slots]

    def pack(self, model: GPT2) -> None:
        """(Re)build the flat buffer from the model's parameters; each becomes a view of it."""
        if model.lm_head.weight is not model.transformer.wte.weight:
            raise RuntimeError("GPT2(fused=True): lm_head.weight is no longer tied to "
                               "transformer.wte.weight; the fused kernel computes the lm_head "
                               "with wte. Re-tie them or use fused=False")
        named = dict(model.named_parameters())
        dtype = _builtin.check_params_dtype("GPT2", *named.items())
        flat = torch.zeros(self.total, dtype=dtype)
        slots = []
        for name, shape, off in self.layout:
            p = named.get(name)
            if p is None:
                continue  # a bias slot of a bias=False model, or the lm_head bias: stays zero
            n = math.prod(shape)
            if tuple(p.shape) != shape:
                raise RuntimeError(f"GPT2(fused=True): parameter {name} has shape "
                                   f"{tuple(p.shape)}, expected {shape}")
            flat[off:off + n].copy_(p.detach().reshape(-1))
            with torch.no_grad():
                p.data = flat[off:off + n].view(shape)
            slots.append((p, off, n))
        self.flat, self.slots = flat, slots
        # buffers of another dtype (after model.double() ...) would only hold memory
        self.grad_bufs = {k: v for k, v in self.grad_bufs.items() if k == dtype}
        self.logits_bufs = {k: v for k, v in self.logits_bufs.items() if k[0] == dtype}

    def ensure_packed(self, model: GPT2) -> None:
        """Re-pack if a parameter stopped aliasing the flat buffer (``.to(dtype)``, a replaced
        Parameter, ``load_state_dict(assign=True)``, a copy of the model...)."""
        with self.lock:
            self._ensure_packed(model)

    def _ensure_packed(self, model: GPT2) -> None:
        flat = self.flat
        if flat is None:
            self.pack(model)
            return
        named = dict(model.named_parameters())
        base, size = flat.data_ptr(), flat.element_size()
        ok = len(named) == len(self.slots)
        if ok:
            by_id = {id(p): (off, n) for p, off, n in self.slots}
            for q in named.values():
                where = by_id.get(id(q))
                if (where is None or q.dtype != flat.dtype or not q.is_contiguous()
                        or q.data_ptr() != base + where[0] * size):
                    ok = False
                    break
        if not ok:
            self.pack(model)

    # -- buffers

    # Arenas are pooled per (dtype, B, T): a training loop reuses one from step to step. At most
    # 2 free arenas per shape and _MAX_SHAPES shapes are kept (generation grows T by one per
    # token); the rest is left to the garbage collector.
    _MAX_SHAPES = 4

    def take_arena(self, key: tuple) -> torch.Tensor:
        with self.lock:
            free = self.arenas.pop(key, [])
            self.arenas[key] = free  # most recently used last
            if free:
                return free.pop()
        dtype, B, T = key
        return torch.empty(arena_size(self.config, B, T), dtype=dtype)

    def give_arena(self, key: tuple, arena: torch.Tensor, after_sweep: bool = False) -> None:
        if after_sweep and not self.keep_scratch:
            return
        with self.lock:
            free = self.arenas.setdefault(key, [])
            if len(free) < 2:
                free.append(arena)
            _trim(self.arenas, self._MAX_SHAPES)

    def take_zeroed(self, what: str, key: tuple, numel: int) -> torch.Tensor:
        """A zero-filled scratch buffer of ``numel`` values, this call's own until
        :meth:`give_scratch` (a concurrent sweep of the same shape gets another one)."""
        buf = self.take_scratch(what, key)
        if buf is None:
            buf = torch.empty(numel, dtype=key[0])
        return buf.zero_()

    def take_scratch(self, what: str, key: tuple) -> Optional[torch.Tensor]:
        """A pooled scratch buffer (any contents) or None."""
        with self.lock:
            return self.scratch.pop((what, key), None)

    def give_scratch(self, what: str, key: tuple, buf: torch.Tensor) -> None:
        if not self.keep_scratch:
            return
        with self.lock:
            self.scratch.pop((what, key), None)
            self.scratch[(what, key)] = buf  # most recently used last
            _trim(self.scratch, 2 * self._MAX_SHAPES)

    # Buffers whose views are handed out (gradients, logits) are reused once nobody else holds
    # them any more: a training loop that drops its gradients (zero_grad(set_to_none=True)) and
    # its logits gets the same memory back every step, instead of fresh memory whose page faults
    # cost ~0.45 ms per MB here (the 124M model's gradient buffer is 0.5 GB). A buffer that is
    # still referenced (p.grad kept by zero_grad(set_to_none=False), a saved gradient, logits
    # alive from the previous step) is left alone and another one is used; at most
    # _MAX_SHARED of them are kept per key.
    _MAX_SHARED = 2
    reuse_buffers = True  # False: always fresh memory (the tests compare the two)
    # The arena and the sweep's scratch (adjoint arena, logits seed) stay pooled after a
    # backward: ~0.43 GB at B=4, T=64 held between steps (during the optimizer step too, which
    # puts the peak RSS of a training step ~0.3 GB above eager's). False returns them after each
    # backward: peak RSS about eager's, but ~0.4 GB of fresh memory (page faults, ~0.3 s here)
    # per step.
    keep_scratch = True

    def take_shared(self, pool: dict, key: Any) -> Optional[torch.Tensor]:
        """A buffer of ``pool[key]`` that no tensor but the pool's references, removed from the
        pool (this call's own until :meth:`give_shared`), or None."""
        if not self.reuse_buffers or _use_count is None:
            return None
        with self.lock:
            free = pool.get(key) or []
            for i in range(len(free) - 1, -1, -1):  # the most recently given first
                if _unshared(free[i]):
                    return free.pop(i)
        return None

    def give_shared(self, pool: dict, key: Any, buf: torch.Tensor) -> None:
        """Put ``buf`` (back) into ``pool[key]``; call it once the views handed out exist, so
        that a concurrent :meth:`take_shared` sees them."""
        if not self.reuse_buffers or _use_count is None:
            return
        with self.lock:
            free = pool.setdefault(key, [])
            if not any(b is buf for b in free):
                free.append(buf)
            while len(free) > self._MAX_SHARED:
                # drop a buffer still held elsewhere first (its holder keeps it alive anyway)
                held = [i for i, b in enumerate(free) if not _unshared(b)]
                free.pop(held[0] if held else 0)
            _trim(pool, self._MAX_SHAPES)

    # -- running

    def forward(self, model: GPT2, idx: torch.Tensor, targets: Optional[torch.Tensor]):
        self.ensure_packed(model)
        cfg = self.config
        B, T = idx.shape
        N = B * T
        for what, n in (("B * T * vocab_size (logits)", N * cfg.vocab_size),
                        ("B * n_head * T * T (attention)", B * cfg.n_head * T * T),
                        ("4 * B * T * n_embd (MLP activations)", 4 * N * cfg.n_embd)):
            _builtin.check_int32("GPT2(fused=True)", what, n)
        idx64 = idx.to(torch.int64).contiguous()
        tgt64 = (targets.to(torch.int64).contiguous() if targets is not None
                 else torch.full((B, T), -1, dtype=torch.int64))
        params = self.params_in_order()
        if torch.is_grad_enabled() and any(p.requires_grad for p in params):
            logits, loss = _FusedGPT2.apply(self, model, idx64, tgt64, *params)
        else:
            logits, loss = self.run(idx64, tgt64, record=False)[:2]
        if targets is None:
            return logits[:, [-1], :], None
        return logits, loss

    def args(self, logits, arena, idx64, tgt64) -> list:
        cfg = self.config
        B, T = idx64.shape
        return [logits.data_ptr(), arena.data_ptr(), self.flat.data_ptr(), idx64.data_ptr(),
                tgt64.data_ptr(), B, T, cfg.n_embd, cfg.vocab_size, cfg.block_size,
                cfg.n_layer, cfg.n_head]

    def run(self, idx64: torch.Tensor, tgt64: torch.Tensor, record: bool):
        """Forward into a logits tensor (on pooled memory nobody holds any more, else fresh) and
        a pooled arena. With ``record``, returns the record the reverse sweep needs (arena,
        tape, the kernel's arguments)."""
        mod = fused_kernel_module()
        dtype = self.flat.dtype
        sfx = _SFX[dtype]
        B, T = idx64.shape
        key = (dtype, B, T)
        shape = (B, T, self.config.vocab_size)
        buf = self.take_shared(self.logits_bufs, key)
        if buf is None:
            buf = torch.empty(math.prod(shape), dtype=dtype)
        # the caller's logits: a tensor of its own (not a view) on the buffer's memory, so that
        # the pool's reference and the caller's are two (see take_shared)
        logits = torch.empty(0, dtype=dtype).set_(buf.untyped_storage(), 0, shape)
        self.give_shared(self.logits_bufs, key, buf)
        arena = self.take_arena(key)
        args = self.args(logits, arena, idx64, tgt64)
        if not record:
            loss = getattr(mod, f"{_KERNEL}_{sfx}")(*args)
            self.give_arena(key, arena)
            return logits, torch.tensor(loss, dtype=dtype), None
        tape = mod.Tape()
        loss = getattr(mod, f"{_KERNEL}_reverse_forw_{sfx}")(*args, tape)
        rec = _Record(self, key, arena, tape, args, logits)
        return logits, torch.tensor(loss, dtype=dtype), rec

    def sweep(self, rec: "_Record", d_logits: Optional[torch.Tensor],
              d_loss: float) -> torch.Tensor:
        """The generated reverse sweep; returns d params (flat), this call's own buffer until
        it is given back with ``give_shared(self.grad_bufs, dtype, d_params)``."""
        mod = fused_kernel_module()
        dtype, B, T = rec.key
        sfx = _SFX[dtype]
        d_params = self.take_shared(self.grad_bufs, dtype)
        if d_params is None:
            d_params = torch.empty(self.total, dtype=dtype)
        d_params.zero_()  # the sweep accumulates into it
        d_acts = self.take_zeroed("d_acts", rec.key, rec.arena.numel())
        # the logits' seed: the sweep zeroes what it reads, so a pooled copy, never d_logits
        seed = self.take_scratch("d_logits", rec.key)
        if seed is None:
            seed = torch.empty(rec.logits.numel(), dtype=dtype)
        if d_logits is None:
            seed.zero_()
        else:
            seed.view(rec.logits.shape).copy_(d_logits)
        try:
            getattr(mod, f"{_KERNEL}_reverse_sweep_{sfx}")(
                *rec.args, float(d_loss), d_params.data_ptr(), seed.data_ptr(),
                d_acts.data_ptr(), rec.tape)
        finally:
            self.give_scratch("d_acts", rec.key, d_acts)
            self.give_scratch("d_logits", rec.key, seed)
        return d_params


try:
    _use_count = torch._C._storage_Use_Count
except AttributeError:  # not in this torch: no reuse of handed-out buffers
    _use_count = None


def _unshared(buf: torch.Tensor) -> bool:
    """Nothing but ``buf`` itself holds its memory: no view, alias or other tensor on it (the
    storage's reference count is ``buf``'s one plus the Python storage object's)."""
    return _use_count(buf.untyped_storage()._cdata) <= 2


def _trim(d: dict, n: int) -> None:
    """Drop the least recently inserted entries of ``d`` beyond ``n``."""
    while len(d) > n:
        d.pop(next(iter(d)))


class _Record:
    """One recorded forward: what its reverse sweep needs. The arena goes back to the pool when
    the sweep is done, or when the record dies unswept (a graph dropped before backward)."""

    __slots__ = ("key", "arena", "tape", "args", "logits", "_release", "__weakref__")

    def __init__(self, fused: _Fused, key, arena, tape, args, logits) -> None:
        self.key, self.arena, self.tape, self.args, self.logits = key, arena, tape, args, logits
        self._release = weakref.finalize(self, fused.give_arena, key, arena, True)

    def release(self) -> None:
        self.tape = None
        self._release()


class _FusedGPT2(torch.autograd.Function):
    """``(fused, model, idx, targets, *params) -> (logits, loss)``; backward = one reverse
    sweep."""

    @staticmethod
    def forward(ctx, fused: _Fused, model: GPT2, idx64, tgt64, *params):
        ctx.set_materialize_grads(False)  # no zero d_logits made for a loss-only backward
        logits, loss, rec = fused.run(idx64, tgt64, record=True)
        ctx.fused, ctx.rec, ctx.model = fused, rec, weakref.ref(model)
        ctx.save_for_backward(idx64, tgt64, *params)
        return logits, loss

    @staticmethod
    def backward(ctx, d_logits, d_loss):
        fused: _Fused = ctx.fused
        saved = ctx.saved_tensors  # raises if a parameter was modified in place since forward
        rec: Optional[_Record] = ctx.rec
        ctx.rec = None
        if rec is None or rec.tape is None:
            # a second backward through the same graph (retain_graph=True): record again
            model = ctx.model()
            if model is None:
                raise RuntimeError("GPT2(fused=True): the model was deleted before a second "
                                   "backward through its graph")
            fused.ensure_packed(model)
            _, _, rec = fused.run(saved[0], saved[1], record=True)
        try:
            d_flat = fused.sweep(rec, d_logits, 0.0 if d_loss is None else d_loss.item())
        finally:
            rec.release()
        grads = [d_flat[off:off + n].view(p.shape) for p, off, n in fused.slots]
        # back into the pool only now that its views exist: reused once they are all gone
        # (AccumulateGrad keeps them as the .grad of the parameters until zero_grad)
        fused.give_shared(fused.grad_bufs, d_flat.dtype, d_flat)
        return (None, None, None, None, *grads)
