"""GPT2(fused=True) specifics: one flat parameter buffer, the arena, the autograd wiring."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from gpt2_helpers import batch, grads, make, require_fused, tiny_config
from torchclad.nn import GPT2, GPT2Config
from torchclad.nn.gpt2 import arena_size, param_layout
from torchclad.testing import ReferenceGPT2


@pytest.fixture(autouse=True)
def _needs_fused():
    require_fused()


def test_layout_covers_every_parameter_once():
    cfg = tiny_config()
    model = GPT2(cfg, fused=True)
    layout = param_layout(cfg)
    named = dict(model.named_parameters())
    slots = {n for n, _, _ in layout}
    assert set(named) <= slots
    assert slots - set(named) == {"lm_head.bias"}
    ends = [off + torch.Size(shape).numel() for _, shape, off in layout]
    assert [off for _, _, off in layout][1:] == ends[:-1]  # contiguous, no overlap
    flat = model._fused.flat
    for n, shape, off in layout:
        if n in named:
            p = named[n]
            assert p.data_ptr() == flat.data_ptr() + off * flat.element_size(), n
    assert arena_size(cfg, 2, 5) == 10 * 8 + 2 * (18 * 10 * 8 + 40 + 2 * 2 * 2 * 25) + 10 * 8 + 30


def test_tied_gradient_is_one_buffer_with_both_contributions():
    """wte's gradient = embedding scatter-add + lm_head weight gradient, accumulated in the one
    flat gradient buffer (no separate lm_head gradient to add)."""
    cfg = tiny_config()
    model, ref = make(cfg, True, torch.float64)
    idx, tgt = batch(cfg, 2, 6)
    model(idx, tgt)[1].backward()
    ref(idx, tgt)[1].backward()
    g = model.transformer.wte.weight.grad
    torch.testing.assert_close(g, ref.transformer.wte.weight.grad, rtol=1e-10, atol=1e-12)
    storages = {p.grad.untyped_storage().data_ptr() for p in model.parameters()}
    assert len(storages) == 1  # every gradient is a view of the sweep's one d_params buffer
    # the lm_head part alone is nonzero: rows of tokens never seen as input still get gradient
    unseen = sorted(set(range(cfg.vocab_size)) - set(idx.reshape(-1).tolist()))
    assert unseen and g[unseen].abs().sum() > 0


def test_arena_is_reused_across_steps():
    cfg = tiny_config()
    model = GPT2(cfg, fused=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    idx, tgt = batch(cfg, 2, 5)
    ptrs = set()
    for _ in range(3):
        _, loss = model(idx, tgt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        pool = model._fused.arenas[(torch.float32, 2, 5)]
        assert len(pool) == 1
        ptrs.add(pool[0].data_ptr())
    assert len(ptrs) == 1
    # parameters still alias the flat buffer after optimizer steps
    flat = model._fused.flat
    assert model.transformer.wte.weight.data_ptr() == flat.data_ptr()


def test_two_forwards_before_backward_and_dropped_graphs():
    cfg = tiny_config()
    model, ref = make(cfg, True, torch.float64)
    (i1, t1), (i2, t2) = batch(cfg, 2, 5, seed=1), batch(cfg, 2, 5, seed=2)
    l1 = model(i1, t1)[1]
    l2 = model(i2, t2)[1]  # a second arena: the first is still waiting for its backward
    (l1 + 2 * l2).backward()
    (ref(i1, t1)[1] + 2 * ref(i2, t2)[1]).backward()
    for k, g in grads(ref).items():
        torch.testing.assert_close(grads(model)[k], g, rtol=1e-10, atol=1e-12, msg=k)
    for _ in range(5):
        model(i1, t1)  # graphs dropped without backward give their arena back
    assert len(model._fused.arenas[(torch.float64, 2, 5)]) <= 2


def test_retain_graph_second_backward_recomputes():
    cfg = tiny_config()
    model, _ = make(cfg, True, torch.float64)
    idx, tgt = batch(cfg, 2, 5)
    loss = model(idx, tgt)[1]
    loss.backward(retain_graph=True)
    first = {k: g.clone() for k, g in grads(model).items()}
    loss.backward()
    for k, g in grads(model).items():
        torch.testing.assert_close(g, 2 * first[k], msg=k)


def test_backward_leaves_logits_alone_and_inplace_update_is_detected():
    cfg = tiny_config()
    model, _ = make(cfg, True)
    idx, tgt = batch(cfg, 2, 5)
    logits, loss = model(idx, tgt)
    before = logits.detach().clone()
    loss.backward()
    assert torch.equal(logits.detach(), before)
    logits, loss = model(idx, tgt)
    with torch.no_grad():
        model.transformer.ln_f.weight.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_dtype_change_and_assign_load_repack():
    cfg = tiny_config()
    torch.manual_seed(0)
    model = GPT2(cfg, fused=True)
    ref = ReferenceGPT2(cfg)
    ref.load_state_dict(model.state_dict())
    model.double()
    ref.double()
    idx, tgt = batch(cfg, 2, 5)
    torch.testing.assert_close(model(idx, tgt)[1], ref(idx, tgt)[1], rtol=1e-12, atol=1e-12)
    assert model._fused.flat.dtype == torch.float64
    torch.manual_seed(9)
    other = ReferenceGPT2(cfg).double()
    model.load_state_dict(other.state_dict(), assign=True)
    model.lm_head.weight = model.transformer.wte.weight  # assign=True replaces the Parameters
    torch.testing.assert_close(model(idx, tgt)[1], other(idx, tgt)[1], rtol=1e-12, atol=1e-12)


def test_replaced_module_or_parameter_repacks():
    """After a step, a replaced submodule or Parameter is packed again before the next one: the
    fused model computes with the new parameters and gives them their gradients."""
    cfg = tiny_config()
    model, ref = make(cfg, True, torch.float64)
    idx, tgt = batch(cfg, 2, 5)
    model(idx, tgt)[1].backward()
    torch.manual_seed(3)
    ln = type(model.transformer.h[0].ln_1)(cfg.n_embd, dtype=torch.float64)
    with torch.no_grad():
        ln.weight.uniform_(0.5, 1.5)
        ln.bias.uniform_(-0.5, 0.5)
    bias = torch.nn.Parameter(torch.rand(cfg.n_embd, dtype=torch.float64))
    model.transformer.h[0].ln_1 = ln
    model.transformer.ln_f.bias = bias
    with torch.no_grad():
        ref.transformer.h[0].ln_1.weight.copy_(ln.weight)
        ref.transformer.h[0].ln_1.bias.copy_(ln.bias)
        ref.transformer.ln_f.bias.copy_(bias)
    model.zero_grad(set_to_none=True)
    loss = model(idx, tgt)[1]
    loss.backward()
    ref_loss = ref(idx, tgt)[1]
    ref_loss.backward()
    torch.testing.assert_close(loss, ref_loss, rtol=1e-12, atol=1e-12)
    packed = [p for p, _, _ in model._fused.slots]
    assert any(p is bias for p in packed) and any(p is ln.weight for p in packed)
    for k, g in grads(ref).items():
        torch.testing.assert_close(grads(model)[k], g, rtol=1e-10, atol=1e-12, msg=k)
    assert ln.weight.grad is not None and bias.grad is not None


def test_a_dropped_model_is_freed_at_once():
    """No reference cycle through the fused state: del frees the model (and its buffers)
    without waiting for the garbage collector."""
    cfg = tiny_config()
    model = GPT2(cfg, fused=True)
    idx, tgt = batch(cfg, 2, 5)
    model(idx, tgt)[1].backward()
    model(idx, tgt)
    ref = weakref.ref(model)
    gc.collect()
    gc.disable()
    try:
        del model
        assert ref() is None
    finally:
        gc.enable()


def test_untied_head_is_refused():
    cfg = tiny_config()
    model = GPT2(cfg, fused=True)
    model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach().clone())
    with pytest.raises(RuntimeError, match="no longer tied"):
        model(*batch(cfg, 1, 3))


def test_no_grad_and_frozen_parameters_skip_the_tape():
    cfg = tiny_config()
    model, ref = make(cfg, True)
    idx, tgt = batch(cfg, 2, 5)
    with torch.no_grad():
        logits, loss = model(idx, tgt)
    assert not loss.requires_grad
    torch.testing.assert_close(loss, ref(idx, tgt)[1])
    model.requires_grad_(False)
    assert not model(idx, tgt)[1].requires_grad


def test_logits_gradient_only():
    """A loss built on the logits alone seeds the sweep through d_logits."""
    cfg = GPT2Config(block_size=8, vocab_size=13, n_layer=1, n_head=2, n_embd=8)
    model, ref = make(cfg, True, torch.float64)
    idx, tgt = batch(cfg, 2, 4)
    w = torch.randn(2, 4, 13, dtype=torch.float64)
    (model(idx, tgt)[0] * w).sum().backward()
    (ref(idx, tgt)[0] * w).sum().backward()
    for k, g in grads(ref).items():
        torch.testing.assert_close(grads(model)[k], g, rtol=1e-10, atol=1e-12, msg=k)


def test_deepcopy_and_pickle_get_their_own_buffers():
    import copy
    import io

    cfg = tiny_config()
    model, ref = make(cfg, True, torch.float64)
    idx, tgt = batch(cfg, 2, 5)
    twin = copy.deepcopy(model)
    with torch.no_grad():
        twin.transformer.ln_f.weight.mul_(3)  # must not leak into the original
    torch.testing.assert_close(model(idx, tgt)[1], ref(idx, tgt)[1], rtol=1e-12, atol=1e-12)
    assert twin.transformer.wte.weight.data_ptr() != model.transformer.wte.weight.data_ptr()
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    loaded(idx, tgt)[1].backward()
    ref(idx, tgt)[1].backward()
    for k, g in grads(ref).items():
        torch.testing.assert_close(grads(loaded)[k], g, rtol=1e-10, atol=1e-12, msg=k)


# ---- reuse of the gradient and logits buffers (see Fused.take_shared)


def _twin_with_fresh_buffers(model):
    """A copy of ``model`` whose sweeps and forwards always get fresh memory."""
    import copy

    twin = copy.deepcopy(model)
    twin._fused.reuse_buffers = False
    return twin


def _grads_equal(a, b):
    ga, gb = grads(a), grads(b)
    assert ga.keys() == gb.keys()
    for k in ga:
        assert torch.equal(ga[k], gb[k]), k


@pytest.mark.parametrize("set_to_none", [True, False], ids=["set_to_none", "zeroed"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_reused_gradient_buffer_equals_fresh_buffers(set_to_none, dtype):
    """Steps of AdamW with the pooled d_params / logits buffers give the very same gradients,
    logits and parameters as fresh buffers, whether zero_grad drops the gradients or zeroes them
    in place (then .grad keeps its buffer and the sweeps use another one)."""
    cfg = tiny_config()
    model, _ = make(cfg, True, dtype)
    fresh = _twin_with_fresh_buffers(model)
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (model, fresh)]
    grad_ptrs = []
    for step in range(4):
        idx, tgt = batch(cfg, 2, 5, seed=step)
        outs = []
        for m, opt in zip((model, fresh), opts):
            opt.zero_grad(set_to_none=set_to_none)
            logits, loss = m(idx, tgt)
            loss.backward()
            opt.step()
            outs.append((logits.detach().clone(), loss.detach()))
        assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])
        _grads_equal(model, fresh)
        for p, q in zip(model.parameters(), fresh.parameters()):
            assert torch.equal(p, q)
        grad_ptrs.append(model.transformer.wte.weight.grad.data_ptr())
    pool = model._fused.grad_bufs[dtype]
    if set_to_none:
        assert len(set(grad_ptrs)) == 1  # one gradient buffer, reused every step
        assert len(pool) == 1
    else:
        assert len(pool) == 2  # .grad's own buffer and the sweeps' one
    assert not fresh._fused.grad_bufs and not fresh._fused.logits_bufs


@pytest.mark.parametrize("streaming", [1, 0], ids=["streamed", "zero_"])
def test_dirty_pooled_buffers_are_zero_filled(monkeypatch, streaming):
    """The pooled gradient buffer holds the last step's values and pooled adjoints may hold
    anything: the sweep starts from them zero-filled, by streaming stores (what the 124M model's
    0.5 GB buffer gets; forced here at the tiny size) or by zero_, and gives fresh buffers'
    gradients."""
    from torchclad.bridge import fastpath
    from torchclad.nn.gpt2 import fused as fused_mod

    ext = fastpath.extension()
    if ext is None:
        pytest.skip("torchclad._C_dispatch is not built here")
    used = []

    def fill(t):
        used.append(ext.zero_fill(t, streaming))
        return t

    monkeypatch.setattr(fused_mod, "zero_fill", fill)
    cfg = tiny_config()
    model, _ = make(cfg, True, torch.float64)
    fresh = _twin_with_fresh_buffers(model)
    idx, tgt = batch(cfg, 2, 5, seed=1)
    f, key = model._fused, (torch.float64, 2, 5)
    for step in range(3):
        for m in (model, fresh):
            m.zero_grad(set_to_none=True)
            m(idx, tgt)[1].backward()
        _grads_equal(model, fresh)
        f.grad_bufs[torch.float64][0].fill_(1.0)  # unshared once zero_grad drops .grad
        f.scratch[("d_acts", key)].fill_(1.0)
        f.scratch_zero.discard(("d_acts", key))
    assert used and all(u == bool(streaming) for u in used)


def test_retained_gradients_and_logits_are_not_overwritten():
    """Gradients and logits the caller still holds after zero_grad(set_to_none=True) keep their
    values: the next steps use other memory."""
    cfg = tiny_config()
    model, _ = make(cfg, True, torch.float64)
    kept = []
    for step in range(4):
        model.zero_grad(set_to_none=True)
        idx, tgt = batch(cfg, 2, 5, seed=step)
        logits, loss = model(idx, tgt)
        loss.backward()
        gs = grads(model)
        kept.append((logits, logits.detach().clone(), gs, {k: g.clone() for k, g in gs.items()}))
    for logits, logits_copy, gs, copies in kept:
        assert torch.equal(logits.detach(), logits_copy)
        for k in gs:
            assert torch.equal(gs[k], copies[k]), k
    storages = {gs["transformer.wte.weight"].untyped_storage().data_ptr() for _, _, gs, _ in kept}
    assert len(storages) == len(kept)
    # dropped: the memory is reused (one buffer left unshared in the pool, then taken again)
    del kept, logits, loss, gs
    model.zero_grad(set_to_none=True)
    model(*batch(cfg, 2, 5))[1].backward()
    ptr = model.transformer.wte.weight.grad.data_ptr()
    model.zero_grad(set_to_none=True)
    model(*batch(cfg, 2, 5, seed=1))[1].backward()
    assert model.transformer.wte.weight.grad.data_ptr() == ptr


def test_accumulation_over_backward_calls_and_a_saved_view():
    """Two backward calls without zero_grad add up (the second sweep must not write the first's
    buffer, which .grad holds); a gradient view saved before zero_grad stays intact."""
    cfg = tiny_config()
    model, ref = make(cfg, True, torch.float64)
    b1, b2, b3 = (batch(cfg, 2, 5, seed=s) for s in (1, 2, 3))
    model(*b1)[1].backward()
    model(*b2)[1].backward()
    ref(*b1)[1].backward()
    ref(*b2)[1].backward()
    for k, g in grads(ref).items():
        torch.testing.assert_close(grads(model)[k], g, rtol=1e-10, atol=1e-12, msg=k)
    row = model.transformer.wte.weight.grad[3]  # a view of the flat gradient buffer
    row_copy = row.clone()
    model.zero_grad(set_to_none=True)
    ref.zero_grad(set_to_none=True)
    model(*b3)[1].backward()
    ref(*b3)[1].backward()
    assert torch.equal(row, row_copy)
    for k, g in grads(ref).items():
        torch.testing.assert_close(grads(model)[k], g, rtol=1e-10, atol=1e-12, msg=k)


def test_loss_and_logits_gradients_together_and_retain_graph():
    """Both outputs seeded (d_logits copied into the pooled seed, never written in place), a
    retained graph swept twice into two gradient buffers."""
    cfg = tiny_config()
    model, ref = make(cfg, True, torch.float64)
    idx, tgt = batch(cfg, 2, 5)
    w = torch.randn(2, 5, cfg.vocab_size, dtype=torch.float64)
    w_copy = w.clone()
    for m in (model, ref):
        logits, loss = m(idx, tgt)
        out = loss + (logits * w).sum()
        out.backward(retain_graph=True)
        out.backward()
    assert torch.equal(w, w_copy)
    for k, g in grads(ref).items():
        torch.testing.assert_close(grads(model)[k], g, rtol=1e-10, atol=1e-12, msg=k)


def test_concurrent_backward_into_grad():
    """Backward from several threads at once into the same .grad (AccumulateGrad): each sweep
    has a gradient buffer of its own; the sum is the serial one."""
    import threading

    cfg = tiny_config()
    model, ref = make(cfg, True, torch.float64)
    batches = [batch(cfg, 2, 5, seed=s) for s in range(6)]
    for _ in range(2):
        model.zero_grad(set_to_none=True)
        losses = [model(*b)[1] for b in batches]
        start = threading.Barrier(3)

        def work(k):
            start.wait()
            for loss in losses[k::3]:
                loss.backward()

        threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for b in batches:
        ref(*b)[1].backward()
    for k, g in grads(ref).items():
        torch.testing.assert_close(grads(model)[k], g, rtol=1e-10, atol=1e-12, msg=k)


def test_scratch_returned_after_backward_gives_the_same_steps(monkeypatch):
    """keep_scratch=False (arena and sweep scratch given back after each backward): the same
    gradients as the pooled default, and nothing kept between steps but the shared buffers."""
    from torchclad.nn.gpt2.fused import Fused

    cfg = tiny_config()
    model, _ = make(cfg, True, torch.float64)
    lean = _twin_with_fresh_buffers(model)
    lean._fused.reuse_buffers = True
    monkeypatch.setattr(lean._fused, "keep_scratch", False)
    assert Fused.keep_scratch
    for step in range(3):
        idx, tgt = batch(cfg, 2, 5, seed=step)
        for m in (model, lean):
            m.zero_grad(set_to_none=True)
            m(idx, tgt)[1].backward()
        _grads_equal(model, lean)
    assert not lean._fused.scratch and not any(lean._fused.arenas.values())
    assert model._fused.scratch and any(model._fused.arenas.values())


def test_pooled_adjoints_start_zero_without_a_fill(monkeypatch):
    """A completed sweep leaves the activations' adjoints and the logits' seed all zero (every
    write's reverse resets the adjoint it read): checked once per shape, the pooled buffers are
    then reused without a zero fill. A sweep that raised marks nothing, and a pooled buffer not
    known to be zero is filled before the next sweep (the same gradients as fresh buffers)."""
    from torchclad.nn.gpt2 import fused as fused_mod

    cfg = tiny_config()
    model, _ = make(cfg, True, torch.float64)
    fresh = _twin_with_fresh_buffers(model)
    idx, tgt = batch(cfg, 2, 5, seed=0)
    model(idx, tgt)[1].backward()
    f, key = model._fused, (torch.float64, 2, 5)
    assert f.sweep_cleans.known() == {("d_acts", key): True, ("d_logits", key): True}
    assert f.scratch_zero == {("d_acts", key), ("d_logits", key)}
    assert not f.scratch[("d_acts", key)].any() and not f.scratch[("d_logits", key)].any()

    real = fused_mod._binding

    def failing(mod, kind, dtype):
        if kind != "reverse_sweep":
            return real(mod, kind, dtype)

        def sweep(*args):
            raise RuntimeError("sweep failed")
        return sweep

    monkeypatch.setattr(fused_mod, "_binding", failing)
    with pytest.raises(RuntimeError, match="sweep failed"):
        model(idx, tgt)[1].backward()
    assert not f.scratch_zero
    monkeypatch.setattr(fused_mod, "_binding", real)
    f.scratch[("d_acts", key)].fill_(1.0)   # as a sweep stopped half-way would leave it
    f.scratch[("d_logits", key)].fill_(1.0)
    for m in (model, fresh):
        m.zero_grad(set_to_none=True)
        m(idx, tgt)[1].backward()
    _grads_equal(model, fresh)
    assert f.scratch_zero == {("d_acts", key), ("d_logits", key)}


def test_dtype_change_drops_the_other_dtype_buffers():
    cfg = tiny_config()
    model, _ = make(cfg, True)
    idx, tgt = batch(cfg, 2, 5)
    model(idx, tgt)[1].backward()
    assert list(model._fused.grad_bufs) == [torch.float32]
    model.zero_grad(set_to_none=True)
    model.double()
    model(idx, tgt)[1].backward()
    assert list(model._fused.grad_bufs) == [torch.float64]
    assert all(k[0] == torch.float64 for k in model._fused.logits_bufs)
