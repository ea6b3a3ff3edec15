"""torchclad.nn.GPT2 (modular and fused) against the plain-PyTorch reference GPT-2."""

from __future__ import annotations

import dataclasses
import io
import math

import pytest
import torch

import torchclad.nn as tnn
from gpt2_helpers import MODES, batch, grads, make, require_fused, tiny_config
from torchclad.nn import GPT2, GPT2Config
from torchclad.nn.gpt2 import TokenIndexError
from torchclad.testing import ReferenceGPT2

MID = dict(block_size=32, vocab_size=65, n_layer=2, n_head=4, n_embd=32)


# ---- construction, names, state_dict


def test_config_defaults_are_gpt2_small():
    c = GPT2Config()
    assert dataclasses.asdict(c) == dict(block_size=1024, vocab_size=50304, n_layer=12,
                                         n_head=12, n_embd=768, bias=True)
    assert GPT2Config(**dataclasses.asdict(c)) == c


@pytest.mark.parametrize("fused", MODES)
def test_names_modules_and_tied_head(fused):
    cfg = tiny_config()
    model, ref = make(cfg, fused)
    assert list(model.state_dict()) == list(ref.state_dict())
    assert model.lm_head.weight is model.transformer.wte.weight
    keys = set(model.state_dict())
    for name in ("transformer.wte.weight", "transformer.wpe.weight", "lm_head.weight",
                 "transformer.h.1.ln_1.weight", "transformer.h.1.attn.c_attn.weight",
                 "transformer.h.1.attn.c_proj.bias", "transformer.h.1.ln_2.bias",
                 "transformer.h.1.mlp.c_fc.weight", "transformer.h.1.mlp.c_proj.bias",
                 "transformer.ln_f.weight", "transformer.ln_f.bias"):
        assert name in keys
    assert isinstance(model.transformer.h[0], tnn.Block)
    assert isinstance(model.transformer.h[0].attn, tnn.CausalSelfAttention)
    assert isinstance(model.transformer.h[0].mlp, tnn.MLP)
    assert isinstance(model.lm_head, tnn.Linear) and model.lm_head.bias is None
    # tied weight counted once
    n = sum(p.numel() for p in model.parameters())
    assert n == sum(p.numel() for p in ref.parameters())
    assert model.get_num_params(non_embedding=False) == n


def test_bias_false_has_no_biases():
    model = GPT2(tiny_config(bias=False))
    assert not [k for k in model.state_dict() if k.endswith(".bias")]
    assert list(model.state_dict()) == list(ReferenceGPT2(tiny_config(bias=False)).state_dict())


def test_init_statistics():
    torch.manual_seed(0)
    model = GPT2(GPT2Config(block_size=64, vocab_size=500, n_layer=4, n_head=4, n_embd=64))
    sd = model.state_dict()
    assert abs(sd["transformer.wte.weight"].std().item() - 0.02) < 2e-3
    assert abs(sd["transformer.h.0.mlp.c_proj.weight"].std().item() - 0.02 / math.sqrt(8)) < 1e-3
    assert sd["transformer.h.0.attn.c_attn.bias"].abs().max() == 0
    assert torch.all(sd["transformer.h.0.ln_1.weight"] == 1)


@pytest.mark.parametrize("fused", MODES)
def test_state_dict_round_trip_both_ways(fused):
    cfg = tiny_config()
    idx, tgt = batch(cfg, 2, 5)
    # ours -> reference
    model, ref = make(cfg, fused)
    torch.testing.assert_close(model(idx, tgt)[1], ref(idx, tgt)[1])
    # reference -> ours (a fresh reference with other weights)
    torch.manual_seed(123)
    ref2 = ReferenceGPT2(cfg)
    missing = model.load_state_dict(ref2.state_dict())
    assert not missing.missing_keys and not missing.unexpected_keys
    l1, L1 = model(idx, tgt)
    l2, L2 = ref2(idx, tgt)
    torch.testing.assert_close(l1, l2, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(L1, L2, rtol=1e-5, atol=1e-5)
    assert model.lm_head.weight is model.transformer.wte.weight
    # through torch.save / torch.load, into the other mode
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    other = GPT2(cfg, fused=not fused)
    other.load_state_dict(torch.load(buf))
    torch.testing.assert_close(other(idx, tgt)[1], L1, rtol=1e-5, atol=1e-5)


def test_llmc_mask_buffers_are_ignored_on_load():
    """llm.c / Hugging Face checkpoints carry the causal mask as attn.bias (1, 1, T, T)."""
    cfg = tiny_config()
    torch.manual_seed(1)
    ref = ReferenceGPT2(cfg)
    sd = dict(ref.state_dict())
    for i in range(cfg.n_layer):
        sd[f"transformer.h.{i}.attn.bias"] = torch.tril(torch.ones(8, 8)).view(1, 1, 8, 8)
    model = GPT2(cfg)
    model.load_state_dict(sd)
    idx, tgt = batch(cfg, 2, 5)
    torch.testing.assert_close(model(idx, tgt)[1], ref(idx, tgt)[1], rtol=1e-5, atol=1e-5)


# ---- gradients: float64 checks


def _loss_fn(model, idx, tgt):
    return lambda *params: model(idx, tgt)[1]


@pytest.mark.parametrize("fused", MODES)
def test_gradcheck_float64(fused):
    cfg = tiny_config()
    model, _ = make(cfg, fused, torch.float64)
    idx, tgt = batch(cfg, 2, 5, ignore=2)
    named = dict(model.named_parameters())
    fn = _loss_fn(model, idx, tgt)
    # every element of two small parameters ...
    small = [named["transformer.ln_f.weight"], named["transformer.h.0.attn.c_attn.bias"]]
    assert torch.autograd.gradcheck(fn, small, eps=1e-6, atol=1e-7, rtol=1e-5)
    # ... and the big ones along random directions (gradcheck's fast mode)
    big = [named[n] for n in ("transformer.wte.weight", "transformer.wpe.weight",
                              "transformer.h.0.attn.c_attn.weight",
                              "transformer.h.1.mlp.c_fc.weight", "transformer.h.1.ln_2.bias")]
    assert torch.autograd.gradcheck(fn, big, eps=1e-6, atol=1e-7, rtol=1e-5, fast_mode=True)


@pytest.mark.parametrize("fused", MODES)
def test_vjp_identity_all_parameters_float64(fused):
    """<J t, w> = <t, J^T w> for every parameter at once: the backward of the weighting w of
    (logits, loss) against a central difference along a random direction t."""
    cfg = tiny_config()
    model, _ = make(cfg, fused, torch.float64)
    idx, tgt = batch(cfg, 2, 5, ignore=1)
    g = torch.Generator().manual_seed(5)
    params = list(model.parameters())
    w_logits = torch.randn(2, 5, cfg.vocab_size, dtype=torch.float64, generator=g)
    w_loss = 0.7

    def scalar() -> torch.Tensor:
        logits, loss = model(idx, tgt)
        return (logits * w_logits).sum() + w_loss * loss

    scalar().backward()
    t = [torch.randn(p.shape, dtype=torch.float64, generator=g) for p in params]
    jt_w = sum((p.grad * d).sum() for p, d in zip(params, t)).item()  # <t, J^T w>
    h = 1e-5
    with torch.no_grad():
        for p, d in zip(params, t):
            p.add_(h * d)
        up = scalar().item()
        for p, d in zip(params, t):
            p.sub_(2 * h * d)
        down = scalar().item()
        for p, d in zip(params, t):
            p.add_(h * d)
    w_jt = (up - down) / (2 * h)  # <J t, w>
    assert abs(w_jt - jt_w) <= 1e-6 * max(1.0, abs(jt_w)), (w_jt, jt_w)


def test_fused_equals_modular_float64():
    require_fused()
    cfg = tiny_config()
    torch.manual_seed(0)
    mod = GPT2(cfg).double()
    fus = GPT2(cfg, fused=True).double()
    fus.load_state_dict(mod.state_dict())
    idx, tgt = batch(cfg, 3, 7, ignore=3)
    outs = []
    for m in (mod, fus):
        logits, loss = m(idx, tgt)
        (logits.sum() * 0.01 + loss).backward()
        outs.append((logits.detach(), loss.detach(), grads(m)))
    torch.testing.assert_close(outs[0][0], outs[1][0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(outs[0][1], outs[1][1], rtol=1e-12, atol=1e-12)
    for k in outs[0][2]:
        torch.testing.assert_close(outs[0][2][k], outs[1][2][k], rtol=1e-10, atol=1e-12, msg=k)


# ---- float32 parity with the reference


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("fused", MODES)
def test_float32_parity_with_reference(fused, bias):
    cfg = GPT2Config(**MID, bias=bias)
    model, ref = make(cfg, fused, seed=3)
    idx, tgt = batch(cfg, 4, 32, seed=1, ignore=5)
    (l1, L1), (l2, L2) = model(idx, tgt), ref(idx, tgt)
    assert abs(L1.item() - L2.item()) < 1e-4
    torch.testing.assert_close(l1, l2, rtol=1e-4, atol=1e-4)
    L1.backward()
    L2.backward()
    ours, theirs = grads(model), grads(ref)
    assert ours.keys() == theirs.keys()
    for k in theirs:
        scale = theirs[k].abs().max().item()
        err = (ours[k] - theirs[k]).abs().max().item()
        assert err <= 1e-3 * scale + 1e-7, f"{k}: max |diff| {err:.2e}, max |grad| {scale:.2e}"


@pytest.mark.parametrize("fused", MODES)
def test_no_targets_returns_last_position(fused):
    cfg = GPT2Config(**MID)
    model, ref = make(cfg, fused)
    idx, _ = batch(cfg, 3, 10)
    logits, loss = model(idx)
    assert loss is None and logits.shape == (3, 1, cfg.vocab_size)
    torch.testing.assert_close(logits, ref(idx)[0], rtol=1e-4, atol=1e-5)
    with torch.no_grad():
        logits2, _ = model(idx)
    torch.testing.assert_close(logits2, logits.detach())


@pytest.mark.parametrize("fused", MODES)
def test_ignore_index_and_int32_inputs(fused):
    cfg = tiny_config()
    model, ref = make(cfg, fused)
    idx, tgt = batch(cfg, 2, 6, ignore=5)
    L1 = model(idx.int(), tgt.int())[1]
    L2 = ref(idx, tgt)[1]
    torch.testing.assert_close(L1, L2, rtol=1e-5, atol=1e-6)
    tgt[:] = -1  # everything ignored: nan, as in torch
    assert torch.isnan(model(idx, tgt)[1]) and torch.isnan(ref(idx, tgt)[1])


# ---- errors and zero sizes


@pytest.mark.parametrize("fused", MODES)
def test_errors(fused):
    cfg = tiny_config()
    model, _ = make(cfg, fused)
    idx, tgt = batch(cfg, 2, 5)
    with pytest.raises(ValueError, match="sequence of length 9, block_size is only 8"):
        model(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(TokenIndexError, match=r"idx contains 11.*\[0, 11\)"):
        model(torch.full((1, 3), 11))
    with pytest.raises(IndexError, match="idx contains -1"):
        model(torch.full((1, 3), -1))
    bad = tgt.clone()
    bad[0, 0] = 12
    with pytest.raises(ValueError, match="targets contains 12"):
        model(idx, bad)
    bad[0, 0] = -2
    with pytest.raises(ValueError, match="targets contains -2"):
        model(idx, bad)
    with pytest.raises(ValueError, match=r"targets has shape \(2, 4\)"):
        model(idx, tgt[:, :4])
    with pytest.raises(TypeError, match="int64"):
        model(idx.float())
    with pytest.raises(TypeError, match=r"\(B, T\)"):
        model(idx[0])
    with pytest.raises(TypeError, match="targets"):
        model(idx, tgt.float())
    with pytest.raises(ValueError, match="T = 0"):
        model(torch.zeros(2, 0, dtype=torch.long))


def test_config_errors():
    with pytest.raises(ValueError, match=r"n_embd \(10\) must be divisible by n_head \(3\)"):
        GPT2(GPT2Config(n_embd=10, n_head=3, n_layer=1, vocab_size=5, block_size=4))
    with pytest.raises(ValueError, match="n_layer must be a positive int"):
        GPT2(GPT2Config(n_layer=0, n_embd=8, n_head=2, vocab_size=5, block_size=4))
    with pytest.raises(ValueError, match="vocab_size"):
        GPT2(GPT2Config(vocab_size=-1, n_layer=1, n_embd=8, n_head=2, block_size=4))


@pytest.mark.parametrize("fused", MODES)
def test_zero_size_batch(fused):
    cfg = tiny_config()
    model, ref = make(cfg, fused)
    for B, T in ((0, 5), (2, 0)):
        idx = torch.zeros(B, T, dtype=torch.long)
        logits, loss = model(idx, idx)
        assert logits.shape == (B, T, cfg.vocab_size)
        assert torch.isnan(loss) and torch.isnan(ref(idx, idx)[1])
        loss.backward()  # no crash; nothing to learn from
        model.zero_grad(set_to_none=True)
    assert model(torch.zeros(0, 3, dtype=torch.long))[0].shape == (0, 1, cfg.vocab_size)


# ---- training


@pytest.mark.parametrize("fused", MODES)
def test_overfits_one_batch(fused):
    """Issue 8: a tiny model drives the loss on a single batch below 0.1."""
    cfg = GPT2Config(block_size=16, vocab_size=20, n_layer=2, n_head=2, n_embd=32)
    model, _ = make(cfg, fused, seed=0)
    idx, tgt = batch(cfg, 4, 16, seed=2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    losses = []
    for _ in range(300):
        _, loss = model(idx, tgt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if loss.item() < 0.1:
            break
    assert losses[-1] < 0.1, (f"loss after {len(losses)} steps: {losses[-1]:.3f} "
                              f"(from {losses[0]:.3f})")


def test_generate():
    cfg = tiny_config()
    model = GPT2(cfg)
    out = model.generate(torch.zeros(2, 3, dtype=torch.long), 9, top_k=4,
                         generator=torch.Generator().manual_seed(0))
    assert out.shape == (2, 12) and int(out.max()) < cfg.vocab_size


# ---- modular: the tied embedding's gradient accumulated in place (gpt2.tied._TiedGrad)


def _spy_tied(monkeypatch):
    """Records, per encoder backward, whether the lm_head's d weight was handed over."""
    from torchclad.nn.gpt2 import tied

    seen = []
    orig = tied._TiedEncoder.backward
    monkeypatch.setattr(tied._TiedGrad, "min_elements", 0)  # the tiny model's wte too

    def backward(ctx, d_out):
        seen.append(ctx.tie.grad is not None)
        return orig(ctx, d_out)

    monkeypatch.setattr(tied._TiedEncoder, "backward", staticmethod(backward))
    return seen


@pytest.mark.parametrize("targets", [True, False], ids=["loss", "last-logits"])
def test_modular_tied_gradient_is_accumulated_in_place(monkeypatch, targets):
    """The encoder's sweep adds into the lm_head's weight gradient (one buffer, handed to
    .grad); the result is the reference's, and the untied-accumulation path's."""
    from torchclad.nn.gpt2 import tied

    from torchclad.builtin import ops as builtin_ops

    seen = _spy_tied(monkeypatch)
    op = builtin_ops.encoder_op
    reading = []  # the sweep that only reads d out (no copy of the grad) ran
    orig = op.run_sweep_reading_seeds
    monkeypatch.setattr(op, "run_sweep_reading_seeds",
                        lambda rec, adj: (reading.append(1), orig(rec, adj)))
    cfg = tiny_config()
    model, ref = make(cfg, False, torch.float64)
    idx, tgt = batch(cfg, 2, 6)
    w = torch.randn(2, 1, cfg.vocab_size, dtype=torch.float64)

    def run(m):
        m.zero_grad(set_to_none=True)
        if targets:
            m(idx, tgt)[1].backward()
        else:
            (m(idx)[0] * w).sum().backward()
        return {k: g.clone() for k, g in grads(m).items()}

    got, want = run(model), run(ref)
    assert seen == [True] and reading == [1]
    for k, g in want.items():
        torch.testing.assert_close(got[k], g, rtol=1e-10, atol=1e-12, msg=k)
    monkeypatch.setattr(tied._TiedGrad, "enabled", False)
    plain = run(model)
    assert seen == [True]  # the plain path: no _TiedEncoder
    for k, g in plain.items():
        torch.testing.assert_close(got[k], g, rtol=1e-12, atol=1e-14, msg=k)


def test_modular_tied_gradient_accumulates_and_retains(monkeypatch):
    """retain_graph: the hand-over happens on each backward; two backward calls add up; a
    frozen wte leaves the plain path to wpe's gradient."""
    seen = _spy_tied(monkeypatch)
    cfg = tiny_config()
    model, ref = make(cfg, False, torch.float64)
    (i1, t1), (i2, t2) = batch(cfg, 2, 5, seed=1), batch(cfg, 2, 5, seed=2)
    l1 = model(i1, t1)[1]
    l1.backward(retain_graph=True)
    l1.backward()
    model(i2, t2)[1].backward()
    r1 = ref(i1, t1)[1]
    r1.backward(retain_graph=True)
    r1.backward()
    ref(i2, t2)[1].backward()
    assert seen == [True, True, True]
    for k, g in grads(ref).items():
        torch.testing.assert_close(grads(model)[k], g, rtol=1e-10, atol=1e-12, msg=k)
    model.zero_grad(set_to_none=True)
    ref.zero_grad(set_to_none=True)
    model.transformer.wte.weight.requires_grad_(False)
    ref.transformer.wte.weight.requires_grad_(False)
    model(i1, t1)[1].backward()
    ref(i1, t1)[1].backward()
    assert model.transformer.wte.weight.grad is None
    torch.testing.assert_close(model.transformer.wpe.weight.grad,
                               ref.transformer.wpe.weight.grad, rtol=1e-10, atol=1e-12)
    assert len(seen) == 3


def test_modular_tied_gradient_is_left_to_autograd_for_a_small_wte(monkeypatch):
    """Below _TiedGrad.min_elements values of wte there is no hand-over: the encoder and the
    lm_head are the plain ops, autograd adds their two gradients; the same gradients."""
    from torchclad.nn.gpt2 import tied

    seen = _spy_tied(monkeypatch)
    cfg = tiny_config()
    model, ref = make(cfg, False, torch.float64)
    idx, tgt = batch(cfg, 2, 5)
    monkeypatch.setattr(tied._TiedGrad, "min_elements", model.transformer.wte.weight.numel() + 1)
    model(idx, tgt)[1].backward()
    ref(idx, tgt)[1].backward()
    assert seen == []
    for k, g in grads(ref).items():
        torch.testing.assert_close(grads(model)[k], g, rtol=1e-10, atol=1e-12, msg=k)
    monkeypatch.setattr(tied._TiedGrad, "min_elements", model.transformer.wte.weight.numel())
    model.zero_grad(set_to_none=True)
    model(idx, tgt)[1].backward()
    assert seen == [True]


def test_modular_tied_gradient_under_create_graph():
    """create_graph=True (a gradient penalty's first step) gives the same gradients, the tied
    embedding's included; second order itself is tests/test_nn_higher_order.py's."""
    cfg = tiny_config()
    model, _ = make(cfg, False, torch.float64)
    idx, tgt = batch(cfg, 2, 5)
    params = [p for p in model.parameters() if p.requires_grad]
    plain = torch.autograd.grad(model(idx, tgt)[1], params)
    graph = torch.autograd.grad(model(idx, tgt)[1], params, create_graph=True)
    assert any(g.requires_grad for g in graph)
    for a, b in zip(plain, graph):
        torch.testing.assert_close(a, b.detach(), rtol=1e-12, atol=1e-12)
