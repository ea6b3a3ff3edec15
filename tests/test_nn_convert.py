"""torchclad.nn.convert: swap supported torch.nn submodules in place."""

from __future__ import annotations

import pytest
import torch

import torchclad.nn as tnn
from torchclad.testing import assert_parity


class Model(torch.nn.Module):
    def __init__(self, dtype=torch.float32):
        super().__init__()
        self.wte = torch.nn.Embedding(20, 16, dtype=dtype)
        self.blocks = torch.nn.Sequential(
            torch.nn.LayerNorm(16, dtype=dtype), torch.nn.Linear(16, 32, dtype=dtype),
            torch.nn.GELU(), torch.nn.Linear(32, 16, bias=False, dtype=dtype),
            torch.nn.LayerNorm(16, eps=1e-6, dtype=dtype), torch.nn.GELU(approximate="tanh"))
        self.head = torch.nn.Linear(16, 20, bias=False, dtype=dtype)
        self.head.weight = self.wte.weight  # tied, like GPT-2
        self.soft = torch.nn.Softmax(dim=-1)
        self.loss = torch.nn.CrossEntropyLoss(ignore_index=-1)

    def forward(self, idx, targets):
        logits = self.head(self.blocks(self.wte(idx)))
        return self.soft(logits), self.loss(logits.view(-1, 20), targets.view(-1))


def test_convert_replaces_and_keeps_outputs_and_gradients():
    torch.manual_seed(0)
    ref = Model()
    model = Model()
    model.load_state_dict(ref.state_dict())
    params_before = {n: p for n, p in model.named_parameters()}
    report = tnn.convert(model)
    names = [r.name for r in report]
    assert names == ["wte", "blocks.0", "blocks.1", "blocks.2", "blocks.3", "blocks.4",
                     "blocks.5", "head", "soft", "loss"]
    assert report[0].before == "torch.nn.Embedding" and report[0].after == "torchclad.nn.Embedding"
    assert report.skipped == []
    assert "replaced 10 module(s)" in str(report)
    assert isinstance(model.blocks[1], tnn.Linear) and isinstance(model.loss, tnn.CrossEntropyLoss)
    assert model.blocks[4].eps == 1e-6 and model.blocks[5].approximate == "tanh"
    assert model.blocks[2].approximate == "none" and model.loss.ignore_index == -1
    # the very same Parameter objects: optimizers and the tie keep working
    assert {n: p for n, p in model.named_parameters()} == params_before
    assert model.head.weight is model.wte.weight
    assert list(model.state_dict()) == list(ref.state_dict())
    idx, tgt = torch.randint(0, 20, (3, 5)), torch.randint(0, 20, (3, 5))
    tgt[0, 0] = -1
    assert_parity(ref, model, idx, tgt, rtol=1e-4, atol=1e-5)
    assert tnn.convert(model) == []  # nothing left to convert


def test_convert_float64_and_shared_submodule():
    lin = torch.nn.Linear(3, 3, dtype=torch.float64)
    model = torch.nn.Sequential(lin, torch.nn.GELU(), lin)
    model.eval()
    report = tnn.convert(model)
    assert [r.name for r in report] == ["0", "1"]
    assert model[0] is model[2] and isinstance(model[0], tnn.Linear)
    assert model[0].weight.dtype == torch.float64 and not model[0].training


def test_convert_skips_what_it_cannot_take():
    class MyLinear(torch.nn.Linear):
        pass

    model = torch.nn.Sequential(
        torch.nn.Embedding(5, 4, padding_idx=0), torch.nn.Linear(4, 4, dtype=torch.float16),
        MyLinear(4, 4), torch.nn.CrossEntropyLoss(label_smoothing=0.1),
        torch.nn.CrossEntropyLoss(weight=torch.ones(4)), torch.nn.ReLU())
    report = tnn.convert(model)
    assert report == []
    reasons = dict(report.skipped)
    assert set(reasons) == {"0", "1", "2", "3", "4"}
    assert "padding_idx=0" in reasons["0"] and "float16" in reasons["1"]
    assert "subclass MyLinear" in reasons["2"] and "label_smoothing" in reasons["3"]
    assert "class weights" in reasons["4"]
    assert type(model[0]) is torch.nn.Embedding and type(model[5]) is torch.nn.ReLU


def test_convert_errors():
    with pytest.raises(TypeError, match="root cannot be replaced"):
        tnn.convert(torch.nn.Linear(2, 2))
    with pytest.raises(TypeError, match="must be a torch.nn.Module"):
        tnn.convert("model")
