"""Thread safety of torchclad ops and modules (issue "Reliability and security").

The bindings release the GIL while C++ runs, so Python threads really run kernels at once. Each
op call keeps its own state (the tape of a forward lives on that call's output; nothing global is
written per call), so several threads calling the same modules, with the same parameters, forward
and backward, must get exactly the results of serial calls — bit for bit. Repeated backward calls
(retain_graph: the second recomputes the record) and repeated forward + backward give identical
results too.
"""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest
import torch

import torchclad
from torchclad.toolchain import store
import torchclad.nn as tnn

THREADS = 4

MUL_TANH = r"""
#include <cmath>
template <typename T>
void mul_tanh(T* out, const T* a, const T* b, T alpha, int N) {
  for (int i = 0; i < N; i++) out[i] = a[i] * std::tanh(b[i]) + alpha * a[i] * a[i];
}
"""


def _mul_tanh_op():
    return torchclad.function(MUL_TANH, "mul_tanh", inputs=["a", "b"],
                              outputs={"out": lambda a, b: a.shape},
                              sizes={"N": lambda a, b: a.numel(), "alpha": lambda a, b: 0.25})


class _Op(torch.nn.Module):
    """A torchclad.function op as a module (no parameters)."""

    def __init__(self, op):
        super().__init__()
        self.op = op

    def forward(self, a, b):
        return self.op(a, b)


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _cases(dtype):
    """name -> (module, inputs(seed))."""
    torch.manual_seed(0)
    cfg = SimpleNamespace(n_embd=48, n_head=4, block_size=32, bias=True, dropout=0.0)
    gcfg = tnn.GPT2Config(block_size=16, vocab_size=37, n_layer=2, n_head=2, n_embd=16)

    def x(*shape):
        return lambda s: (torch.randn(*shape, generator=_gen(s), dtype=dtype),)

    def idx_tgt(s, B=3, T=16, V=37):
        g = _gen(s)
        return torch.randint(0, V, (B, T), generator=g), torch.randint(0, V, (B, T), generator=g)

    def logits_targets(s):
        g = _gen(s)
        t = torch.randint(0, 50, (64,), generator=g)
        t[::7] = -100
        return torch.randn(64, 50, generator=g, dtype=dtype) * 4, t

    cases = {
        "function": (_Op(_mul_tanh_op()),
                     lambda s: tuple(torch.randn(40, 33, generator=_gen(s), dtype=dtype) for _ in "ab")),
        "Linear": (tnn.Linear(64, 48), x(8, 16, 64)),
        "LayerNorm": (tnn.LayerNorm(64), x(8, 16, 64)),
        "GELU": (tnn.GELU("tanh"), x(8, 16, 64)),
        "Softmax": (tnn.Softmax(-1), x(8, 16, 64)),
        "Embedding": (tnn.Embedding(50, 32),
                      lambda s: (torch.randint(0, 50, (8, 16), generator=_gen(s)),)),
        "CrossEntropyLoss": (tnn.CrossEntropyLoss(), logits_targets),
        "CausalSelfAttention": (tnn.CausalSelfAttention(cfg), x(4, 32, 48)),
        "MLP": (tnn.MLP(cfg), x(4, 32, 48)),
        "Block": (tnn.Block(cfg), x(2, 32, 48)),
        "GPT2": (_Loss(tnn.GPT2(gcfg)), idx_tgt),
        "GPT2-fused": (_Loss(tnn.GPT2(gcfg, fused=True)), idx_tgt),
    }
    return {k: (m.to(dtype), f) for k, (m, f) in cases.items()}


class _Loss(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, idx, targets):
        return self.model(idx, targets)[1]


def _fwd_bwd(module, inputs, seed):
    """Output and the gradients of <output, g> w.r.t. floating inputs and parameters (no .grad)."""
    xs = [t.clone().requires_grad_() if t.is_floating_point() else t for t in inputs]
    y = module(*xs)
    g = torch.randn(y.shape, generator=_gen(seed + 1000), dtype=y.dtype)
    wrt = [t for t in xs if t.requires_grad] + [p for p in module.parameters() if p.requires_grad]
    grads = torch.autograd.grad(y, wrt, g)
    return [y.detach(), *grads]


def _assert_identical(got, want, what):
    assert len(got) == len(want), what
    for k, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype and a.shape == b.shape, f"{what}[{k}]"
        assert torch.equal(a, b), (f"{what}[{k}]: max abs diff "
                                   f"{(a.double() - b.double()).abs().max().item():.3g}")


@pytest.fixture(scope="module", params=[torch.float32, torch.float64], ids=["float32", "float64"])
def cases(request):
    return _cases(request.param)


def test_threads_match_serial_bit_for_bit(cases):
    """THREADS threads, each running a shuffled list of (module, seed) forward + backward, over
    shared modules: every result equals the serial one exactly."""
    seeds = range(3)
    serial = {(name, s): _fwd_bwd(m, make(s), s) for name, (m, make) in cases.items() for s in seeds}
    jobs = [(name, s) for name in cases for s in seeds] * 2
    random.Random(0).shuffle(jobs)
    start = threading.Barrier(THREADS)

    def worker(k):
        start.wait()
        out = []
        for name, s in jobs[k::THREADS]:
            m, make = cases[name]
            out.append(((name, s), _fwd_bwd(m, make(s), s)))
        return out

    with ThreadPoolExecutor(THREADS) as pool:
        results = [r for fut in [pool.submit(worker, k) for k in range(THREADS)] for r in fut.result()]
    assert len(results) == len(jobs)
    for key, got in results:
        _assert_identical(got, serial[key], f"{key} in a thread vs serial")


def test_repeated_backward_is_identical(cases):
    """retain_graph: the first backward consumes the forward's tape, the second recomputes it;
    both, and a fresh forward + backward, give the same bits."""
    for name, (m, make) in cases.items():
        xs = [t.clone().requires_grad_() if t.is_floating_point() else t for t in make(7)]
        y = m(*xs)
        g = torch.randn(y.shape, generator=_gen(8), dtype=y.dtype)
        wrt = [t for t in xs if t.requires_grad] + list(m.parameters())
        first = torch.autograd.grad(y, wrt, g, retain_graph=True)
        second = torch.autograd.grad(y, wrt, g, retain_graph=True)
        third = torch.autograd.grad(y, wrt, g)
        _assert_identical(list(second), list(first), f"{name}: second backward")
        _assert_identical(list(third), list(first), f"{name}: third backward")
        _assert_identical(_fwd_bwd(m, make(7), 7)[1:], _fwd_bwd(m, make(7), 7)[1:],
                          f"{name}: repeated forward + backward")


def test_grad_accumulation_from_threads_sums_every_call(cases):
    """.backward() from several threads into shared parameters: every call's gradient arrives
    (torch serialises the accumulation); the sum equals the serial sum up to rounding order."""
    m, make = cases["LayerNorm"]
    inputs = [make(s)[0] for s in range(8)]
    m.zero_grad()
    for x in inputs:
        m(x).square().sum().backward()
    want = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    start = threading.Barrier(THREADS)

    def worker(k):
        start.wait()
        for x in inputs[k::THREADS]:
            m(x).square().sum().backward()

    with ThreadPoolExecutor(THREADS) as pool:
        for f in [pool.submit(worker, k) for k in range(THREADS)]:
            f.result()
    for p, w in zip(m.parameters(), want):
        torch.testing.assert_close(p.grad, w)
    m.zero_grad()


def test_function_created_from_threads_at_once(tmp_path, monkeypatch):
    """torchclad.function with one new source from several threads at once (an empty cache: the
    builds race for the lock): one op, one build, correct results in every thread."""
    monkeypatch.setenv("TORCHCLAD_CACHE_DIR", str(tmp_path / "cache"))
    src = MUL_TANH.replace("0.25", "0.5").replace("mul_tanh", "mul_tanh_threads")
    src += "\n// threads test: a source no other test builds\n"
    start = threading.Barrier(THREADS)
    outputs = {"out": lambda a, b: a.shape}  # one spec (functions compare by identity)
    sizes = {"N": lambda a, b: a.numel(), "alpha": lambda a, b: 0.5}

    def make(_):
        start.wait()
        op = torchclad.function(src, "mul_tanh_threads", inputs=["a", "b"], outputs=outputs,
                                sizes=sizes)
        a, b = torch.randn(5, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
        torch.testing.assert_close(op(a, b), a * torch.tanh(b) + 0.5 * a * a)
        return op

    with ThreadPoolExecutor(THREADS) as pool:
        made = list(pool.map(make, range(THREADS)))
    assert all(op is made[0] for op in made), [getattr(op, "_name", op) for op in made]
    entries = [p for p in (tmp_path / "cache").iterdir() if p.name not in store.SUBDIRS]
    assert len(entries) == 1, entries
