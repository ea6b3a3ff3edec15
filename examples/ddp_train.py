"""Data-parallel training of a torchclad GPT-2 on CPU with DistributedDataParallel (gloo).

    torchrun --nproc_per_node=2 examples/ddp_train.py --steps 20

Each process trains on its own slice of every batch; DDP averages the gradients (the
generated backward of each replica feeds autograd's all-reduce hooks like any module's).
"""
from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist

from torchclad.nn import GPT2, GPT2Config


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=8, help="global batch, split across processes")
    ap.add_argument("--fused", action="store_true")
    args = ap.parse_args()
    dist.init_process_group("gloo")          # torchrun sets RANK, WORLD_SIZE, MASTER_ADDR/PORT
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)                     # same initial weights everywhere
    cfg = GPT2Config(block_size=32, vocab_size=64, n_layer=2, n_head=2, n_embd=32)
    model = torch.nn.parallel.DistributedDataParallel(GPT2(cfg, fused=args.fused))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(1)     # same data stream everywhere; each takes its rows
    for step in range(args.steps):
        data = torch.randint(0, cfg.vocab_size, (args.batch, cfg.block_size + 1), generator=g)
        rows = data[rank::world]
        _, loss = model(rows[:, :-1], rows[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if rank == 0 and (step % 5 == 0 or step == args.steps - 1):
            print(f"step {step:3d}  loss {loss.item():.4f}  ({world} processes)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
