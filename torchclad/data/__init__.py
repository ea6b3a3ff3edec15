"""A small text corpus, generated on the spot, and character / byte tokenizers.

Nothing is downloaded: :func:`tiny_corpus` writes plain English-like prose from a small grammar
with a seeded generator, so the text is the same on every machine and run. It has structure at
several scales (spelling, word order, a/an agreement, recurring names, the days in order) that a
small character-level GPT-2 picks up in a minute or two on a laptop CPU.

::

    from torchclad.data import tiny_corpus, CharTokenizer, batches
    text = tiny_corpus()
    tok = CharTokenizer(text)
    data = tok.encode(text)                    # int64 tensor
    for x, y in batches(data, batch_size=16, block_size=64, seed=0): ...
"""

from __future__ import annotations

import random
from typing import Iterator, Sequence

import torch

__all__ = ["tiny_corpus", "CharTokenizer", "ByteTokenizer", "batches", "train_val_split"]

_NAMES = ("Ada", "Basil", "Cora", "Dmitri", "Elsa", "Farid", "Greta", "Hugo", "Ines", "Jonas")
_ANIMALS = ("cat", "dog", "owl", "fox", "hen", "goat", "otter", "eagle", "heron", "ox")
_ADJ = ("old", "small", "quiet", "bright", "lazy", "eager", "grey", "young", "odd", "amber")
_PLACES = ("the river", "the old mill", "the market", "the hill", "the orchard",
           "the harbour", "the bridge", "the forest", "the square", "the island")
_VERBS = (("sees", "saw"), ("feeds", "fed"), ("follows", "followed"), ("finds", "found"),
          ("paints", "painted"), ("calls", "called"), ("meets", "met"), ("helps", "helped"))
_OBJECTS = ("apple", "letter", "lantern", "map", "egg", "umbrella", "key", "basket", "owl", "oar")
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


_PLURAL = {"fox": "foxes", "ox": "oxen", "goat": "goats", "key": "keys", "map": "maps"}


def _plural(word: str) -> str:
    return _PLURAL.get(word, word + "s")


def _a(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def _sentence(rng: random.Random, day: int) -> str:
    who = rng.choice(_NAMES)
    animal = f"{rng.choice(_ADJ)} {rng.choice(_ANIMALS)}"
    verb_now, verb_past = rng.choice(_VERBS)
    kind = rng.randrange(6)
    if kind == 0:
        return f"{who} {verb_now} {_a(animal)} near {rng.choice(_PLACES)}."
    if kind == 1:
        return (f"On {_DAYS[day % 7]}, {who} {verb_past} {_a(rng.choice(_OBJECTS))} at "
                f"{rng.choice(_PLACES)}.")
    if kind == 2:
        other = rng.choice([n for n in _NAMES if n != who])
        return f"{who} and {other} walk to {rng.choice(_PLACES)} with {_a(rng.choice(_OBJECTS))}."
    if kind == 3:
        n = rng.randint(2, 9)
        return (f"There are {n} {_plural(rng.choice(_ANIMALS))} and {n + 1} "
                f"{_plural(rng.choice(_OBJECTS))} by {rng.choice(_PLACES)}.")
    if kind == 4:
        return f"The {animal} {verb_past} {who} because it was {rng.choice(_ADJ)}."
    return (f"\"Where is the {rng.choice(_OBJECTS)}?\" asked {who}. "
            f"\"By {rng.choice(_PLACES)},\" said the {animal}.")


def tiny_corpus(n_chars: int = 200_000, seed: int = 1337) -> str:
    """About ``n_chars`` characters of generated prose (paragraphs of 3-6 sentences).

    Deterministic for a given ``seed``; 56 distinct characters with the defaults.
    """
    if n_chars < 0:
        raise ValueError(f"tiny_corpus: n_chars must be >= 0, got {n_chars}")
    rng = random.Random(seed)
    parts: list[str] = []
    size, day = 0, 0
    while size < n_chars:
        para = " ".join(_sentence(rng, day) for _ in range(rng.randint(3, 6))) + "\n\n"
        parts.append(para)
        size += len(para)
        day += 1
    return "".join(parts)[:n_chars]


class CharTokenizer:
    """One token per distinct character of a text (sorted), like nanoGPT's shakespeare_char."""

    def __init__(self, text: str | Sequence[str]) -> None:
        self.chars: tuple[str, ...] = tuple(sorted(set(text)))
        if not self.chars:
            raise ValueError("CharTokenizer: the text is empty, there is no character to index")
        self.stoi = {c: i for i, c in enumerate(self.chars)}

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> torch.Tensor:
        try:
            return torch.tensor([self.stoi[c] for c in text], dtype=torch.long)
        except KeyError as e:
            raise ValueError(f"CharTokenizer.encode: character {e.args[0]!r} is not in the "
                             f"vocabulary ({self.vocab_size} characters)") from None

    def decode(self, ids) -> str:
        """Ids outside the vocabulary (a model with a padded vocab_size) decode to U+FFFD."""
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        n = len(self.chars)
        return "".join(self.chars[i] if 0 <= i < n else "\ufffd" for i in ids)

    def state_dict(self) -> dict:
        return {"chars": "".join(self.chars)}

    @classmethod
    def from_state_dict(cls, state: dict) -> "CharTokenizer":
        return cls(state["chars"])


class ByteTokenizer:
    """UTF-8 bytes as tokens (vocab 256); needs no fitting."""

    vocab_size = 256

    def encode(self, text: str) -> torch.Tensor:
        return torch.tensor(list(text.encode("utf-8")), dtype=torch.long)

    def decode(self, ids) -> str:
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        return bytes(ids).decode("utf-8", errors="replace")


def train_val_split(data: torch.Tensor,
                    val_fraction: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``1 - val_fraction`` of the tokens for training, the rest for validation."""
    n = int(len(data) * (1 - val_fraction))
    return data[:n], data[n:]


def batches(data: torch.Tensor, batch_size: int, block_size: int, seed: int = 0,
            steps: int | None = None) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Random (inputs, next-token targets) windows of ``block_size`` tokens, (B, T) int64 each."""
    if len(data) <= block_size:
        raise ValueError(f"batches: the data has {len(data)} tokens, need more than "
                         f"block_size = {block_size}")
    g = torch.Generator().manual_seed(seed)
    k = 0
    while steps is None or k < steps:
        ix = torch.randint(len(data) - block_size, (batch_size,), generator=g)
        x = torch.stack([data[i:i + block_size] for i in ix.tolist()])
        y = torch.stack([data[i + 1:i + 1 + block_size] for i in ix.tolist()])
        yield x, y
        k += 1
