"""GPT-2 fused: the whole forward is one C++ function, ``gpt2_forward`` in
``csrc/kernels/gpt2.cpp``, and the whole backward is one generated reverse sweep of it.

The parameters live in one flat buffer (each ``Parameter`` is a view of it, so ``state_dict``,
optimizers and ``load_state_dict`` see ordinary parameters; :func:`param_layout` mirrors the
kernel's layout) and the activations in a preallocated arena (:func:`arena_size`) sized from
(config, B, T), reused from step to step. :class:`Fused` is the fused path of one model.
"""

from __future__ import annotations

import math
import threading
import weakref
from typing import Any, Optional

import torch

from torchclad.bridge.higher import needs_functions

from torchclad.bridge.kernel import SCALAR_OF_DTYPE
from torchclad.bridge.memory import zero_fill
from torchclad.bridge.scratch import ZeroAfterSweep
from torchclad.builtin import loader
from torchclad.toolchain.glue import binding_name

from ..checks import check_int32, check_params_dtype
from . import sharing

__all__ = ["param_layout", "arena_size", "fused_kernel_module", "Fused"]


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


_KERNEL = "gpt2_forward"
_kernel_module: Any = None


def fused_kernel_module() -> Any:
    """The compiled module holding ``gpt2_forward_{,reverse_forw_,reverse_sweep_}{f32,f64}``.

    The built-in extension (:func:`torchclad.builtin.loader.extension`), built at install time
    from the entry in ``torchclad/builtin/registry.py``. If that extension predates the entry
    (an install from before it), the same unit is generated and compiled on first use instead
    (cached under ``$TORCHCLAD_CACHE_DIR``).
    """
    global _kernel_module
    if _kernel_module is not None:
        return _kernel_module
    C = loader.extension()
    if hasattr(C, binding_name(_KERNEL, "reverse_sweep", "float")):
        _kernel_module = C
        return C
    import os

    from torchclad import engine, toolchain
    from torchclad.builtin import registry

    spec = next(s for s in registry.KERNELS if s.name == _KERNEL)
    d = engine.differentiate(registry.unit_source(spec), _KERNEL, list(spec.wrt),
                             filename=f"csrc/kernels/{spec.file}")
    lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    _kernel_module = toolchain.load(d, extra_ldflags=[f"-L{lib}", "-ltorch_cpu", f"-Wl,-rpath,{lib}"])
    return _kernel_module


def _binding(mod: Any, kind: str, dtype: torch.dtype):
    """``gpt2_forward``'s function of ``kind`` ("" for the primal) for ``dtype`` in ``mod``."""
    return getattr(mod, binding_name(_KERNEL, kind, SCALAR_OF_DTYPE[dtype]))


class Fused:
    """The fused path of one GPT2: flat parameter buffer, arena pool, calls into the kernel."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self.layout = param_layout(config)
        self.total = self.layout[-1][2] + math.prod(self.layout[-1][1])
        self._reset()

    def _reset(self) -> None:
        self.flat: Optional[torch.Tensor] = None
        self.slots: list[tuple[torch.nn.Parameter, int, int]] = []  # (param, offset, numel)
        self.tree: tuple = ()  # the model's modules and parameters as packed (_tree)
        self.grad_views: list[tuple] = []  # per slot (shape, strides, offset): see grads()
        self.arenas: dict[tuple, list[torch.Tensor]] = {}
        self.scratch: dict[tuple, torch.Tensor] = {}
        # (what, key) of the pooled scratch buffers known to be all zero (see sweep), and per
        # (what, key) whether a completed sweep leaves that buffer all zero (checked once)
        self.scratch_zero: set[tuple] = set()
        self.sweep_cleans = ZeroAfterSweep()
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

    def pack(self, model: Any) -> None:
        """(Re)build the flat buffer from the model's parameters; each becomes a view of it.
        Checks them first (dtype, device: the model's forward leaves that to this)."""
        named = dict(model.named_parameters())
        dtype = check_params_dtype("GPT2", *named.items())
        if model.lm_head.weight is not model.transformer.wte.weight:
            raise RuntimeError("GPT2(fused=True): lm_head.weight is no longer tied to "
                               "transformer.wte.weight; the fused kernel computes the lm_head "
                               "with wte. Re-tie them or use fused=False")
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
        self.flat, self.slots, self.tree = flat, slots, _tree(model)
        self.grad_views = [(p.shape, p.stride(), off) for p, off, _ in slots]
        # buffers of another dtype (after model.double() ...) would only hold memory
        self.grad_bufs = {k: v for k, v in self.grad_bufs.items() if k == dtype}
        self.logits_bufs = {k: v for k, v in self.logits_bufs.items() if k[0] == dtype}

    def grads(self, d_flat: torch.Tensor) -> list[torch.Tensor]:
        """The parameters' gradients: views of d_flat, in slot order (as_strided, one call
        each: slicing and viewing took 0.1 ms a step for the demo model's 28)."""
        view = torch.Tensor.as_strided
        return [view(d_flat, shape, strides, off) for shape, strides, off in self.grad_views]

    def ensure_packed(self, model: Any) -> None:
        """Re-pack if a parameter stopped aliasing the flat buffer (``.to(dtype)``, a replaced
        Parameter, ``load_state_dict(assign=True)``, a copy of the model...)."""
        with self.lock:
            self._ensure_packed(model)

    def _ensure_packed(self, model: Any) -> None:
        # The same modules holding the same Parameters as when packed (a walk of the module
        # dicts: named_parameters() took 0.12 ms, 1% of a step at the demo size), each still
        # a view of its slot.
        flat = self.flat
        if flat is None or not _same_tree(model, self.tree):
            self.pack(model)
            return
        base, size, dtype = flat.data_ptr(), flat.element_size(), flat.dtype
        for p, off, _ in self.slots:
            if p.dtype != dtype or not p.is_contiguous() or p.data_ptr() != base + off * size:
                self.pack(model)
                return

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
        with self.lock:
            zero = (what, key) in self.scratch_zero
            buf = self.take_scratch(what, key)
        if buf is None:
            return torch.zeros(numel, dtype=key[0])
        return buf if zero else zero_fill(buf)

    def take_scratch(self, what: str, key: tuple) -> Optional[torch.Tensor]:
        """A pooled scratch buffer (any contents) or None."""
        with self.lock:
            self.scratch_zero.discard((what, key))
            return self.scratch.pop((what, key), None)

    def give_scratch(self, what: str, key: tuple, buf: torch.Tensor, swept: bool) -> None:
        """Pool buf for the next call of this shape; swept: a completed sweep consumed it, so it
        is all zero if such sweeps leave it so (checked on the first of this shape: the reverse
        of every write of the forward resets the adjoint it read, Clad's convention for
        overwritten memory, so the next sweep can start from the buffer as it is instead of
        zero-filling it again; the fill was 7% of a one-thread training step of the demo
        model)."""
        if not self.keep_scratch:
            return
        zero = swept and self.sweep_cleans((what, key), buf)
        with self.lock:
            self.scratch.pop((what, key), None)
            self.scratch[(what, key)] = buf  # most recently used last
            if zero:
                self.scratch_zero.add((what, key))
            else:
                self.scratch_zero.discard((what, key))
            _trim(self.scratch, 2 * self._MAX_SHAPES)
            self.scratch_zero &= set(self.scratch)

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
        if not self.reuse_buffers or not sharing.AVAILABLE:
            return None
        with self.lock:
            free = pool.get(key) or []
            for i in range(len(free) - 1, -1, -1):  # the most recently given first
                if sharing.unshared(free[i]):
                    return free.pop(i)
        return None

    def give_shared(self, pool: dict, key: Any, buf: torch.Tensor) -> None:
        """Put ``buf`` (back) into ``pool[key]``; call it once the views handed out exist, so
        that a concurrent :meth:`take_shared` sees them."""
        if not self.reuse_buffers or not sharing.AVAILABLE:
            return
        with self.lock:
            free = pool.setdefault(key, [])
            if not any(b is buf for b in free):
                free.append(buf)
            while len(free) > self._MAX_SHARED:
                # drop a buffer still held elsewhere first (its holder keeps it alive anyway)
                held = [i for i, b in enumerate(free) if not sharing.unshared(b)]
                free.pop(held[0] if held else 0)
            _trim(pool, self._MAX_SHAPES)

    # -- running

    def forward(self, model: Any, idx: torch.Tensor, targets: Optional[torch.Tensor]):
        if needs_functions():
            raise higher_order_error("forward AD and torch.func transforms")
        self.ensure_packed(model)
        cfg = self.config
        B, T = idx.shape
        N = B * T
        for what, n in (("B * T * vocab_size (logits)", N * cfg.vocab_size),
                        ("B * n_head * T * T (attention)", B * cfg.n_head * T * T),
                        ("4 * B * T * n_embd (MLP activations)", 4 * N * cfg.n_embd)):
            check_int32("GPT2(fused=True)", what, n)
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
            loss = _binding(mod, "", dtype)(*args)
            self.give_arena(key, arena)
            return logits, torch.scalar_tensor(loss, dtype=dtype), None
        tape = mod.Tape()
        loss = _binding(mod, "reverse_forw", dtype)(*args, tape)
        rec = _Record(self, key, arena, tape, args, logits)
        return logits, torch.scalar_tensor(loss, dtype=dtype), rec

    def sweep(self, rec: "_Record", d_logits: Optional[torch.Tensor],
              d_loss: float) -> torch.Tensor:
        """The generated reverse sweep; returns d params (flat), this call's own buffer until
        it is given back with ``give_shared(self.grad_bufs, dtype, d_params)``."""
        mod = fused_kernel_module()
        dtype, B, T = rec.key
        d_params = self.take_shared(self.grad_bufs, dtype)
        if d_params is None:
            d_params = torch.empty(self.total, dtype=dtype)
        zero_fill(d_params)  # the sweep accumulates into it
        d_acts = self.take_zeroed("d_acts", rec.key, rec.arena.numel())
        # the logits' seed: the sweep zeroes what it reads, so a pooled copy, never d_logits
        if d_logits is None:
            seed = self.take_zeroed("d_logits", rec.key, rec.logits.numel())
        else:
            seed = self.take_scratch("d_logits", rec.key)
            if seed is None:
                seed = torch.empty(rec.logits.numel(), dtype=dtype)
            seed.view(rec.logits.shape).copy_(d_logits)
        swept = False
        try:
            _binding(mod, "reverse_sweep", dtype)(
                *rec.args, float(d_loss), d_params.data_ptr(), seed.data_ptr(),
                d_acts.data_ptr(), rec.tape)
            swept = True
        finally:
            self.give_scratch("d_acts", rec.key, d_acts, swept)
            self.give_scratch("d_logits", rec.key, seed, swept)
        return d_params


def _tree(model: Any) -> tuple:
    """``model`` and its modules, each (by a weak reference: the model holds this, so a strong
    one would be a cycle that keeps a dropped model until the garbage collector runs) with the
    items of its ``_modules`` and ``_parameters``."""
    return tuple((weakref.ref(m), tuple(m._modules.items()), tuple(m._parameters.items()))
                 for m in model.modules())


_MISSING = object()


def _same_tree(model: Any, tree: tuple) -> bool:
    """``model`` holds the modules and parameters ``tree`` recorded (compared by identity): no
    module or Parameter replaced, added or removed anywhere in it."""
    if not tree or tree[0][0]() is not model:
        return False
    for ref, modules, params in tree:
        m = ref()
        if m is None:
            return False
        for d, items in ((m._modules, modules), (m._parameters, params)):
            if len(d) != len(items):
                return False
            for k, v in items:
                if d.get(k, _MISSING) is not v:
                    return False
    return True


def _trim(d: dict, n: int) -> None:
    """Drop the least recently inserted entries of ``d`` beyond ``n``."""
    while len(d) > n:
        d.pop(next(iter(d)))


def higher_order_error(what: str) -> RuntimeError:
    """The fused model's refusal of higher order (one generated reverse sweep, first order)."""
    return RuntimeError(
        f"GPT2(fused=True): {what} is not supported: the fused model is one kernel with one "
        "generated reverse sweep (first order). Use GPT2(config, fused=False), whose layers carry "
        "their jvp and double backward, with the same parameters (load_state_dict).")


class _Record:
    """One recorded forward: what its reverse sweep needs. The arena goes back to the pool when
    the sweep is done, or when the record dies unswept (a graph dropped before backward)."""

    __slots__ = ("key", "arena", "tape", "args", "logits", "_release", "__weakref__")

    def __init__(self, fused: Fused, key, arena, tape, args, logits) -> None:
        self.key, self.arena, self.tape, self.args, self.logits = key, arena, tape, args, logits
        self._release = weakref.finalize(self, fused.give_arena, key, arena, True)

    def release(self) -> None:
        self.tape = None
        self._release()


class _FusedGPT2(torch.autograd.Function):
    """``(fused, model, idx, targets, *params) -> (logits, loss)``; backward = one reverse
    sweep."""

    @staticmethod
    def forward(ctx, fused: Fused, model: Any, idx64, tgt64, *params):
        ctx.set_materialize_grads(False)  # no zero d_logits made for a loss-only backward
        logits, loss, rec = fused.run(idx64, tgt64, record=True)
        ctx.fused, ctx.rec, ctx.model = fused, rec, weakref.ref(model)
        ctx.save_for_backward(idx64, tgt64, *params)
        return logits, loss

    @staticmethod
    def backward(ctx, d_logits, d_loss):
        if torch.is_grad_enabled():
            raise higher_order_error("double backward (create_graph=True)")
        fused: Fused = ctx.fused
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
        grads = fused.grads(d_flat)
        # back into the pool only now that its views exist: reused once they are all gone
        # (AccumulateGrad keeps them as the .grad of the parameters until zero_grad)
        fused.give_shared(fused.grad_bufs, d_flat.dtype, d_flat)
        return (None, None, None, None, *grads)
