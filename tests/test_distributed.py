"""DistributedDataParallel (gloo, CPU, 2 processes on 127.0.0.1): the averaged gradients equal a
single process's gradient on the whole batch, for both GPT-2 modes (one pair of processes)."""

from __future__ import annotations

import os
import socket
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from gpt2_helpers import batch, grads, require_fused, tiny_config
from torchclad.nn import GPT2

WORLD = 2
TIMEOUT_S = 90


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, port: int, modes: list, state: dict, idx, tgt, out: str) -> None:
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"  # loopback only
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD, timeout=timedelta(seconds=60))
    try:
        rows = slice(rank * len(idx) // WORLD, (rank + 1) * len(idx) // WORLD)
        for fused in modes:
            model = GPT2(tiny_config(), fused=fused).double()
            model.load_state_dict(state)
            ddp = torch.nn.parallel.DistributedDataParallel(model)
            _, loss = ddp(idx[rows], tgt[rows])
            loss.backward()
            g = {n: p.grad.clone() for n, p in model.named_parameters()}
            torch.optim.SGD(model.parameters(), lr=0.5).step()
            torch.save({"grads": g, "state": model.state_dict()},
                       os.path.join(out, f"{'fused' if fused else 'modular'}-rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def test_ddp_gradients_match_single_process(tmp_path):
    cfg = tiny_config()
    require_fused()              # both modes, always: a missing fused kernel is a failure
    modes = [False, True]
    torch.manual_seed(0)
    idx, tgt = batch(cfg, 4, 6, seed=3)
    state = {k: v.clone() for k, v in GPT2(cfg).double().state_dict().items()}
    expect = {}
    for fused in modes:  # one process, the whole batch
        model = GPT2(cfg, fused=fused).double()
        model.load_state_dict(state)
        model(idx, tgt)[1].backward()
        expect[fused] = grads(model)

    ctx = mp.get_context("spawn")
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, port, modes, state, idx, tgt, str(tmp_path)))
             for r in range(WORLD)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(TIMEOUT_S)
    alive = [p for p in procs if p.is_alive()]
    for p in alive:
        p.terminate()
        p.join(5)
    assert not alive, f"DDP workers still running after {TIMEOUT_S} s"
    assert [p.exitcode for p in procs] == [0] * WORLD

    for fused in modes:
        name = "fused" if fused else "modular"
        results = [torch.load(tmp_path / f"{name}-rank{r}.pt") for r in range(WORLD)]
        for r in results:
            assert r["grads"].keys() == expect[fused].keys()
            for k, g in expect[fused].items():
                torch.testing.assert_close(r["grads"][k], g, rtol=1e-10, atol=1e-12,
                                           msg=f"{name}: {k}")
        for k, v in results[0]["state"].items():  # identical parameters after the step
            assert torch.equal(v, results[1]["state"][k]), f"{name}: {k}"
