"""A small GPT-like stack of torchclad.nn modules under torch.compile(fullgraph=True)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import torchclad.nn as tnn
from torchclad.testing import assert_parity

CFG = SimpleNamespace(n_embd=16, n_head=2, block_size=8, bias=True)


class Stack(torch.nn.Module):
    def __init__(self, vocab=11):
        super().__init__()
        self.wte = tnn.Embedding(vocab, CFG.n_embd)
        self.ln_1 = tnn.LayerNorm(CFG.n_embd)
        self.attn = tnn.CausalSelfAttention(CFG)
        self.ln_2 = tnn.LayerNorm(CFG.n_embd)
        self.mlp = tnn.MLP(CFG)
        self.lm_head = tnn.Linear(CFG.n_embd, vocab, bias=False)
        self.softmax = tnn.Softmax(dim=-1)
        self.loss = tnn.CrossEntropyLoss(ignore_index=-1)

    def forward(self, idx, targets):
        x = self.wte(idx)
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        logits = self.lm_head(x)
        return self.softmax(logits), self.loss(logits.flatten(0, 1), targets.flatten())


def test_torch_compile_fullgraph_matches_eager():
    torch.manual_seed(0)
    eager = Stack()
    compiled = torch.compile(Stack(), fullgraph=True)
    for T in (5, 8):
        idx, tgt = torch.randint(0, 11, (2, T)), torch.randint(0, 11, (2, T))
        tgt[1, 2] = -1
        errors = assert_parity(eager, compiled, idx, tgt, rtol=1e-4, atol=1e-5)
        assert "grad of parameter 'attn.c_attn.weight'" in errors
    # index checks run inside the compiled graph too
    with pytest.raises(IndexError, match="index 11 is out of range"):
        compiled(torch.tensor([[1, 11]]), torch.tensor([[0, 0]]))
