"""Convert an existing PyTorch model to torchclad layers, then keep training it.

    python examples/convert_model.py

``torchclad.nn.convert(model)`` swaps, in place, the submodules torchclad has kernels for
(Linear, LayerNorm, GELU, Softmax, Embedding, CrossEntropyLoss) and reports what it did. The
converted modules keep the very same Parameter objects, so the optimizer built before the
conversion keeps working and the state_dict is unchanged. Their backward passes are generated
by the engine from the forward kernels in csrc/kernels/ (matmul's is the one hand-written BLAS
derivative).
"""

from __future__ import annotations

import copy
import sys

import torch

import torchclad.nn


class TinyClassifier(torch.nn.Module):
    """An ordinary torch.nn model: token embedding, a pre-norm MLP block, mean pooling, a head."""

    def __init__(self, vocab: int = 32, dim: int = 64, classes: int = 4) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.norm = torch.nn.LayerNorm(dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim),
                                       torch.nn.GELU(approximate="tanh"),
                                       torch.nn.Linear(4 * dim, dim))
        self.head = torch.nn.Linear(dim, classes)
        self.loss = torch.nn.CrossEntropyLoss()

    def forward(self, tokens: torch.Tensor, labels: torch.Tensor):
        h = self.embed(tokens)
        h = h + self.mlp(self.norm(h))
        logits = self.head(h.mean(dim=1))
        return logits, self.loss(logits, labels)


def make_batch(g: torch.Generator, n: int = 64, length: int = 12, vocab: int = 32):
    """Label = which quarter of the vocabulary the most frequent token falls in."""
    tokens = torch.randint(0, vocab, (n, length), generator=g)
    labels = tokens.mode(dim=1).values // (vocab // 4)
    return tokens, labels


def main(argv=None) -> int:
    steps = int(argv[0]) if argv else 150
    torch.manual_seed(0)
    model = TinyClassifier()
    original = copy.deepcopy(model)  # kept as plain torch, for comparison
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)  # built before the conversion

    report = torchclad.nn.convert(model)
    print(report)
    print()

    # Same weights: both models compute the same thing before training.
    g = torch.Generator().manual_seed(0)
    tokens, labels = make_batch(g)
    with torch.no_grad():
        a, la = original(tokens, labels)
        b, lb = model(tokens, labels)
    print(f"before training: loss torch {la.item():.6f}, converted {lb.item():.6f}, "
          f"max |logit diff| {(a - b).abs().max().item():.1e}")

    opt_ref = torch.optim.AdamW(original.parameters(), lr=3e-3)
    worst = 0.0
    for step in range(steps):
        tokens, labels = make_batch(g)
        for m, o in ((model, opt), (original, opt_ref)):
            _, loss = m(tokens, labels)
            o.zero_grad()
            loss.backward()
            o.step()
        with torch.no_grad():
            l_conv, l_torch = model(tokens, labels)[1].item(), original(tokens, labels)[1].item()
        worst = max(worst, abs(l_conv - l_torch))
        if step % 25 == 0 or step == steps - 1:
            print(f"step {step:4d}  loss converted {l_conv:.4f}  torch {l_torch:.4f}")

    tokens, labels = make_batch(torch.Generator().manual_seed(123), n=512)
    with torch.no_grad():
        acc = (model(tokens, labels)[0].argmax(1) == labels).float().mean().item()
    print(f"accuracy of the converted model on fresh data: {acc:.1%} (chance: 25%)")
    same_keys = model.state_dict().keys() == original.state_dict().keys()
    print(f"state_dict keys unchanged by convert: {same_keys}; "
          f"largest loss difference to the torch copy over training: {worst:.1e}")
    return 0 if (len(report) == 7 and same_keys and worst < 1e-3) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
