"""A model made of torchclad modules compiles with torch.compile(fullgraph=True) (no graph
breaks) and gives the same loss and gradients as eager (issue "Torch bridge")."""
from __future__ import annotations

import torch

from torchclad.nn import GPT2, GPT2Config


def test_small_gpt2_compiles_fullgraph_with_eager_loss_and_gradients():
    torch.manual_seed(0)
    cfg = GPT2Config(block_size=16, vocab_size=37, n_layer=2, n_head=2, n_embd=16)
    eager = GPT2(cfg)
    compiled_model = GPT2(cfg)
    compiled_model.load_state_dict(eager.state_dict())
    idx = torch.randint(0, cfg.vocab_size, (2, 12))
    tgt = torch.randint(0, cfg.vocab_size, (2, 12))

    _, loss = eager(idx, tgt)
    loss.backward()

    step = torch.compile(lambda i, t: compiled_model(i, t)[1], fullgraph=True)
    closs = step(idx, tgt)
    closs.backward()

    torch.testing.assert_close(closs, loss, rtol=1e-5, atol=1e-6)
    grads = dict(compiled_model.named_parameters())
    for name, p in eager.named_parameters():
        torch.testing.assert_close(grads[name].grad, p.grad, rtol=1e-4, atol=1e-5,
                                   msg=lambda m, n=name: f"{n}: {m}")


def test_compiled_gpt2_still_rejects_out_of_range_tokens():
    import pytest
    cfg = GPT2Config(block_size=8, vocab_size=11, n_layer=1, n_head=2, n_embd=8)
    model = GPT2(cfg)
    step = torch.compile(lambda i, t: model(i, t)[1], fullgraph=True)
    idx = torch.randint(0, cfg.vocab_size, (1, 6))
    tgt = idx.clone()
    step(idx, tgt)
    bad = idx.clone()
    bad[0, 3] = cfg.vocab_size            # one past the vocabulary
    with pytest.raises(Exception, match="11"):
        step(bad, tgt)
