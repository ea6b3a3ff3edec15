"""GPT2(fused=True) specifics: one flat parameter buffer, the arena, the autograd wiring."""

from __future__ import annotations

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
