"""Train a GPT-2 with torchclad on a generated text corpus (character level, CPU).

    python examples/train_gpt2.py                          # small model, fused kernel
    python examples/train_gpt2.py --mode modular --steps 200
    python examples/train_gpt2.py --save ckpt.pt           # checkpoint at the end
    python examples/train_gpt2.py --load ckpt.pt --steps 100   # resume: model, optimizer, step
    python examples/train_gpt2.py --n-layer 12 --n-head 12 --n-embd 768 --block-size 1024 \
        --vocab-size 50304 --batch-size 4 --seq-len 64 --steps 1   # a GPT-2 124M step

``--mode fused`` runs the whole model forward as one C++ function (csrc/kernels/gpt2.cpp) and its
backward as one engine-generated reverse sweep; ``--mode modular`` chains torchclad.nn layers.
Checkpoints are ordinary ``state_dict``s (nanoGPT naming): a plain-PyTorch GPT-2 loads them.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import resource
import sys
import time

import torch

from torchclad.data import CharTokenizer, batches, tiny_corpus, train_val_split
from torchclad.nn import GPT2, GPT2Config


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = p.add_argument_group("model")
    g.add_argument("--n-layer", type=int, default=4)
    g.add_argument("--n-head", type=int, default=4)
    g.add_argument("--n-embd", type=int, default=128)
    g.add_argument("--block-size", type=int, default=128, help="context length of the model")
    g.add_argument("--vocab-size", type=int, default=None,
                   help="default: the tokenizer's; larger pads the embedding (e.g. 50304)")
    g.add_argument("--no-bias", action="store_true", help="GPT2Config(bias=False)")
    g.add_argument("--mode", choices=("fused", "modular"), default="fused")
    g.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    t = p.add_argument_group("training")
    t.add_argument("--steps", type=int, default=500)
    t.add_argument("--batch-size", type=int, default=16)
    t.add_argument("--seq-len", type=int, default=None, help="T of a batch (default: block size)")
    t.add_argument("--lr", type=float, default=2e-3)
    t.add_argument("--min-lr", type=float, default=2e-4)
    t.add_argument("--warmup", type=int, default=20)
    t.add_argument("--weight-decay", type=float, default=0.1)
    t.add_argument("--grad-clip", type=float, default=1.0)
    t.add_argument("--seed", type=int, default=1337)
    t.add_argument("--corpus-chars", type=int, default=300_000)
    t.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    e = p.add_argument_group("logging, evaluation, checkpoints")
    e.add_argument("--log-every", type=int, default=10)
    e.add_argument("--eval-every", type=int, default=100)
    e.add_argument("--eval-batches", type=int, default=8)
    e.add_argument("--sample", type=int, default=200,
                   help="characters to sample at the end (0: none)")
    e.add_argument("--save", default=None, help="checkpoint path written at the end")
    e.add_argument("--save-every", type=int, default=0)
    e.add_argument("--load", default=None, help="checkpoint to resume from")
    return p.parse_args(argv)


def lr_at(step: int, a) -> float:
    """Linear warmup, then cosine decay to min_lr."""
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    frac = min(1.0, (step - a.warmup) / max(1, a.total_steps - a.warmup))
    return a.min_lr + 0.5 * (1 + math.cos(math.pi * frac)) * (a.lr - a.min_lr)


def configure_optimizer(model: torch.nn.Module, a) -> torch.optim.Optimizer:
    """AdamW; weight decay on matrices only (not on biases, LayerNorm, as in nanoGPT)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=a.lr, betas=(0.9, 0.95))


def save_checkpoint(path: str, model, opt, tok, step: int, a) -> None:
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                "config": dataclasses.asdict(model.config), "tokenizer": tok.state_dict(),
                "step": step, "mode": a.mode}, tmp)
    os.replace(tmp, path)
    print(f"saved checkpoint {path} (step {step})", flush=True)


@torch.no_grad()
def evaluate(model, data, a) -> float:
    losses = [model(x, y)[1].item()
              for x, y in batches(data, a.batch_size, a.seq_len, seed=1, steps=a.eval_batches)]
    return sum(losses) / len(losses)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def main(argv=None) -> int:
    a = parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    dtype = getattr(torch, a.dtype)

    text = tiny_corpus(a.corpus_chars, seed=a.seed)
    ckpt = torch.load(a.load, map_location="cpu", weights_only=False) if a.load else None
    tok = CharTokenizer.from_state_dict(ckpt["tokenizer"]) if ckpt else CharTokenizer(text)
    train, val = train_val_split(tok.encode(text), 0.1)

    if ckpt:
        config = GPT2Config(**ckpt["config"])
    else:
        vocab = a.vocab_size or tok.vocab_size
        if vocab < tok.vocab_size:
            sys.exit(f"--vocab-size {vocab} is below the tokenizer's {tok.vocab_size}")
        config = GPT2Config(block_size=a.block_size, vocab_size=vocab, n_layer=a.n_layer,
                            n_head=a.n_head, n_embd=a.n_embd, bias=not a.no_bias)
    a.seq_len = a.seq_len or config.block_size
    model = GPT2(config, fused=(a.mode == "fused")).to(dtype)
    opt = configure_optimizer(model, a)
    start = 0
    if ckpt:
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        start = ckpt["step"]
        print(f"resumed from {a.load} at step {start}")
    a.total_steps = start + a.steps
    n = model.get_num_params(non_embedding=False)
    print(f"GPT-2 {config}  mode={a.mode}  {n / 1e6:.2f}M parameters  dtype={a.dtype}")
    print(f"data: {len(text):,} characters, vocab {tok.vocab_size}; batch {a.batch_size} x "
          f"{a.seq_len}; {torch.get_num_threads()} thread(s)", flush=True)

    model.train()
    data = batches(train, a.batch_size, a.seq_len, seed=a.seed + start, steps=a.steps)
    times = []
    loss = None
    for i, (x, y) in enumerate(data):
        step = start + i
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a)
        t0 = time.perf_counter()
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        times.append(time.perf_counter() - t0)
        if step % a.log_every == 0 or i == a.steps - 1:
            print(f"step {step:5d}  loss {loss.item():.4f}  lr {lr_at(step, a):.2e}  "
                  f"{1e3 * times[-1]:.0f} ms/step  peak RSS {peak_rss_mb():.0f} MB", flush=True)
        if a.eval_every and (step + 1) % a.eval_every == 0:
            print(f"step {step:5d}  val loss {evaluate(model, val, a):.4f}", flush=True)
        if a.save and a.save_every and (step + 1) % a.save_every == 0:
            save_checkpoint(a.save, model, opt, tok, step + 1, a)

    if times:
        med = sorted(times)[len(times) // 2]
        print(f"done: {len(times)} steps, median {1e3 * med:.0f} ms/step, "
              f"{a.batch_size * a.seq_len / med:,.0f} tokens/s, final loss {loss.item():.4f}, "
              f"peak RSS {peak_rss_mb():.0f} MB")
    if a.eval_batches:
        print(f"val loss {evaluate(model, val, a):.4f}")
    if a.sample:
        ctx = tok.encode("\n").unsqueeze(0) if "\n" in tok.stoi else train[:1].unsqueeze(0)
        out = model.generate(ctx, a.sample, temperature=0.8, top_k=20,
                             generator=torch.Generator().manual_seed(a.seed))
        print("sample:\n" + tok.decode(out[0]))
    if a.save:
        save_checkpoint(a.save, model, opt, tok, start + len(times), a)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
