"""The examples run, with tiny settings (in-process: each example's main(argv) returns 0)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from gpt2_helpers import fused_unavailable

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"torchclad_example_{name}",
                                                  EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


TINY_GPT2 = ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "16",
             "--batch-size", "4", "--corpus-chars", "6000", "--eval-every", "3",
             "--eval-batches", "1", "--sample", "16", "--log-every", "2"]


@pytest.mark.parametrize("mode", ["modular", "fused"])
def test_train_gpt2_with_checkpoint_resume(mode, tmp_path, capsys):
    if mode == "fused" and fused_unavailable():
        pytest.fail(f"fused GPT-2 unavailable: {fused_unavailable()}", pytrace=False)
    ex = _load("train_gpt2")
    ckpt = tmp_path / "ckpt.pt"
    threads = torch.get_num_threads()
    try:
        assert ex.main(TINY_GPT2 + ["--mode", mode, "--steps", "4", "--save", str(ckpt)]) == 0
        first = capsys.readouterr().out
        assert "step     0  loss" in first and "val loss" in first and "sample:" in first
        assert f"saved checkpoint {ckpt} (step 4)" in first
        state = torch.load(ckpt, weights_only=False)
        assert state["step"] == 4 and "transformer.wte.weight" in state["model"]
        # resume: the model, optimizer and step come back
        assert ex.main(TINY_GPT2 + ["--mode", mode, "--steps", "2", "--load", str(ckpt),
                                    "--save", str(ckpt)]) == 0
        second = capsys.readouterr().out
        assert f"resumed from {ckpt} at step 4" in second and "step     4  loss" in second
        assert torch.load(ckpt, weights_only=False)["step"] == 6
    finally:
        torch.set_num_threads(threads)


def test_custom_kernel(capsys):
    ex = _load("custom_kernel")
    assert ex.main(["60"]) == 0
    out = capsys.readouterr().out
    assert "void huber_loss_pullback(" in out and "_d_pred[i] +=" in out
    assert "float64 gradcheck: passed" in out
    assert "Huber fit:" in out


def test_convert_model(capsys):
    ex = _load("convert_model")
    assert ex.main(["8"]) == 0
    out = capsys.readouterr().out
    assert "torchclad.nn.convert: replaced 7 module(s)" in out
    assert "mlp.0: torch.nn.Linear -> torchclad.nn.Linear" in out
    assert "state_dict keys unchanged by convert: True" in out


def test_demo_smoke(tmp_path, capsys):
    """`make demo`'s main with a few steps of a tiny model: everything runs, the plot is written
    (the exit code needs a real training run: loss parity and a drop of the loss by 1 nat)."""
    from torchclad import demo

    demo.main(["--steps", "4", "--n-layer", "1", "--n-embd", "16", "--n-head", "2",
               "--block-size", "16", "--batch-size", "4", "--log-every", "2",
               "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert "gelu_forward_reverse_sweep" in out and "matmul_forward_pullback" in out
    assert "3. Summary (4 steps)" in out and "loss parity per step" in out
    assert (tmp_path / "gpt2_loss.png").stat().st_size > 1000


def test_pinn_uses_the_kernels_double_backward_and_matches_torch(capsys):
    """examples/pinn.py: the flux kernel's generated double backward runs in loss.backward(),
    and 20 training steps give the losses of the same model with the flux in torch ops."""
    ex = _load("pinn")
    flux = ex.kernel_flux()
    _, losses = ex.train(flux, 20, 16)
    _, ref = ex.train(ex.torch_flux, 20, 16)
    assert ex.largest_relative_difference(losses, ref) <= 1e-10, (losses, ref)
    assert losses[-1] < 0.9 * losses[0]
    net = ex.network(0)
    x = torch.linspace(0, 1, 10, dtype=torch.float64)[1:-1]
    loss = ex.loss_fn(net, flux, x, ex.source(x), torch.tensor([0.0, 1.0], dtype=torch.float64))
    with torch.profiler.profile() as prof:
        loss.backward()
    ran = {e.name for e in prof.events()}
    assert any(n.startswith("torchclad::flux_") and n.endswith("_hvp") for n in ran), ran
    assert ex.main(["--steps", "3", "--points", "8", "--compare"]) == 0
    out = capsys.readouterr().out
    assert "relative L2 error vs sin(pi x)" in out and "largest relative difference" in out
