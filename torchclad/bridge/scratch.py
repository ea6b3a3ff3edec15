"""The adjoint buffers of one op's reverse sweeps, and the pool they are reused from.

A sweep reads its seeds (copies of the incoming grads) and zeroes them as it reads, so they are
scratch once it returns: reusing them spares an allocation (and, for large ones, the page faults
of fresh memory: glibc returns freed heap tops to the OS) per backward. Seeds that came back all
zero are kept apart: an input adjoint of the same shape starts from one of them (the sweep
accumulates into it) instead of from a fresh zero-filled buffer -- a memory pass fewer per
backward. That holds for kernels that write every element of their outputs (each write's
reverse reads and zeroes that element's adjoint); it is checked on the first seed of each
(shape, dtype), and a seed found not all zero turns the zero pool off for the op.
"""

from __future__ import annotations

import threading
from typing import Sequence

import torch

from torchclad.bridge.kernel import Kernel
from torchclad.bridge.memory import PLAIN, Memory


class ZeroAfterSweep:
    """Whether a sweep leaves a buffer it consumed (a seed, an adjoint arena) all zero, per key:
    decided by a read of the first such buffer of each key, then remembered. A completed sweep
    resets every adjoint it reads (the reverse of a write zeroes the adjoint of the overwritten
    value), so the next sweep of that key can start from the buffer as it is instead of zero
    filling it. Used by :class:`SweepBuffers` (per op) and by the fused GPT-2
    (torchclad.nn.gpt2.fused, per buffer and shape)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._known: dict = {}

    def __call__(self, key, buf: torch.Tensor) -> bool:
        with self.lock:
            known = self._known.get(key)
        if known is None:
            known = not bool(buf.any())
            with self.lock:
                self._known[key] = known
        return known

    def known(self) -> dict:
        """The keys checked so far, each with its result."""
        with self.lock:
            return dict(self._known)


class SweepBuffers:
    """The adjoints of one op's sweeps: input adjoints, seeds, and a few reusable buffers per
    (shape, dtype), most recently used kept.

    ``zero_pool``: the kernel writes every element of its outputs, so seeds come back all zero
    (checked) and may start input adjoints. ``memory`` makes the buffers (guarded ones for a
    debug op)."""

    PER_KEY = 2
    KEYS = 4

    def __init__(self, kernel: Kernel, inputs: Sequence[str], out_names: Sequence[str],
                 diff_in: Sequence[int], diff_out: Sequence[int], zero_pool: bool,
                 memory: Memory = PLAIN) -> None:
        k = kernel
        self.k = k
        self.mem = memory
        self.zero_pool = zero_pool
        self.lock = threading.Lock()
        self.free: dict[tuple, list[torch.Tensor]] = {}
        self.zero: dict[tuple, list[torch.Tensor]] = {}
        self._zeroed = ZeroAfterSweep()
        self._out_names = tuple(out_names)
        self._diff_out = tuple(diff_out)
        self._seed_names = frozenset(out_names[i] for i in diff_out)
        self._diff_in_names = frozenset(inputs[i] for i in diff_in)
        self._adj_plan = tuple((w, bool(k.by_name[w].pointer)) for w in k.adjoints)

    def adjoints(self, bufs: dict, outs: Sequence[torch.Tensor], grads: Sequence,
                 out_dtypes: Sequence[torch.dtype], scalar: str):
        """``({name: adjoint}, seeds)`` for a sweep on the buffers ``bufs``: the input adjoints
        zero-filled (the sweep accumulates into them), the outputs' seeded with copies of
        ``grads`` (one per differentiable output; None seeds zeros). ``seeds`` are the scratch
        buffers to :meth:`give_back` once the sweep is done."""
        k = self.k
        # The input adjoints first, taken first from the zero pool of earlier seeds, so that
        # the seeds do not use it up.
        adj: dict[str, torch.Tensor] = {}
        for w, pointer in self._adj_plan:
            if w in self._seed_names:
                continue
            if pointer:
                b = bufs[w]
                adj[w] = (self.take_zeroed(b.shape, b.dtype) if self.zero_pool
                          else self.mem.zeros(b.shape, b.dtype))
            else:
                adj[w] = self.mem.zeros((), k.dtype_of(k.by_name[w], scalar))
        # Seeds: in scratch buffers reused from call to call -- unless the seed is also an
        # input's gradient (an output that is an input too), which is handed out.
        seeds: list[torch.Tensor] = []
        for i, g in zip(self._diff_out, grads):
            n = self._out_names[i]
            if n in self._diff_in_names:
                adj[n] = (self.mem.zeros(outs[i].shape, outs[i].dtype) if g is None else
                          self.mem.copy(g.to(out_dtypes[i])))
                continue
            buf = self.take(outs[i].shape, out_dtypes[i])
            if g is None:
                buf.zero_()
            else:
                buf.copy_(g)
            adj[n] = buf
            seeds.append(buf)
        return adj, seeds

    def give_back(self, seeds: Sequence[torch.Tensor]) -> None:
        """Return the seeds of a finished sweep to the pool (to the zero pool if all zero)."""
        for buf in seeds:
            self.give(buf, self.zero_pool and self._seed_zeroed(buf))

    def _seed_zeroed(self, buf: torch.Tensor) -> bool:
        """Whether a seed the sweep just consumed is all zero: checked on the first seed of each
        (shape, dtype); a failed check turns the zero pool off for this op."""
        if self._zeroed((tuple(buf.shape), buf.dtype), buf):
            return True
        self.zero_pool = False
        return False

    # ---- the pool

    def take(self, shape, dtype) -> torch.Tensor:
        """A buffer of any content."""
        key = (tuple(shape), dtype)
        with self.lock:
            free = self.free.get(key) or self.zero.get(key)
            if free:
                return free.pop()
        return self.mem.empty(key[0], dtype)

    def take_zeroed(self, shape, dtype) -> torch.Tensor:
        """A zero-filled buffer (from the zero pool, else a fresh one)."""
        key = (tuple(shape), dtype)
        with self.lock:
            zero = self.zero.get(key)
            if zero:
                return zero.pop()
        return self.mem.zeros(key[0], dtype)

    def give(self, buf: torch.Tensor, zeroed: bool = False) -> None:
        key = (tuple(buf.shape), buf.dtype)
        pool = self.zero if zeroed else self.free
        with self.lock:
            free = pool.get(key)
            if free is None:
                free = pool[key] = []
                while len(pool) > self.KEYS:
                    del pool[next(iter(pool))]
            if len(free) < self.PER_KEY:
                free.append(buf)
