"""Your own C++ kernel as a differentiable PyTorch op: a Huber loss, differentiated by torchclad.

    python examples/custom_kernel.py

1. the kernel: plain C++ (a template, so float32 and float64 come from one source),
2. ``torchclad.function`` differentiates it (the engine emits the reverse-mode code), compiles it
   and returns a ``torch.library`` custom op; the generated pullback is printed,
3. float64 ``torch.autograd.gradcheck`` on the op, and a check against the same loss in torch,
4. the op used as a training loss: a robust linear regression with outliers.
"""

from __future__ import annotations

import sys

import torch

import torchclad

# Huber loss, mean over N elements: quadratic within delta, linear outside (robust to outliers).
HUBER = r"""
#include <cmath>

template <typename T>
T huber_loss(const T* pred, const T* target, int N, T delta) {
    T total = 0;
    for (int i = 0; i < N; i++) {
        T r = pred[i] - target[i];
        T a = std::fabs(r);
        if (a <= delta) {
            total += T(0.5) * r * r;
        } else {
            total += delta * (a - T(0.5) * delta);
        }
    }
    return total / N;
}
"""


def main(argv=None) -> int:
    steps = int(argv[0]) if argv else 200
    torch.manual_seed(0)

    # 2. differentiate + compile (cached on disk after the first run) -> a custom op
    huber = torchclad.function(
        HUBER, "huber_loss",
        inputs=["pred", "target"],            # pointer parameters, in op argument order
        outputs={},                           # nothing written: the result is the return value
        sizes={"N": lambda pred, target: pred.numel(), "delta": lambda pred, target: 1.0},
    )
    g = torchclad.gradient(HUBER, "huber_loss", wrt="pred")
    # Generated functions (Clad's conventions): huber_loss_pullback (forward + reverse sweep),
    # huber_loss_grad (seed 1), and the split pair the op runs, huber_loss_reverse_forw (forward,
    # records the branch taken on a tape) / huber_loss_reverse_sweep (backward only).
    pullback = next(f for f in g.source.split("\n\n") if "void huber_loss_pullback(" in f)
    print("generated pullback (torchclad.gradient(HUBER, 'huber_loss', wrt='pred').source):\n")
    print(pullback.strip() + "\n")

    # 3. gradcheck in float64, and parity with torch.nn.functional.huber_loss in float32
    p64 = torch.randn(7, 5, dtype=torch.float64, requires_grad=True) * 2
    t64 = torch.randn(7, 5, dtype=torch.float64)
    p64 = p64.detach().requires_grad_()
    ok = torch.autograd.gradcheck(lambda p: huber(p, t64), (p64,))
    print(f"float64 gradcheck: {'passed' if ok else 'FAILED'}")
    p32 = (torch.randn(1000) * 3).requires_grad_()
    t32 = torch.randn(1000)
    ours = huber(p32, t32)
    ours.backward()
    g_ours = p32.grad.clone()
    p32.grad = None
    ref = torch.nn.functional.huber_loss(p32, t32, delta=1.0)
    ref.backward()
    err = (g_ours - p32.grad).abs().max().item()
    print(f"float32 vs torch.nn.functional.huber_loss: loss {ours.item():.6f} vs {ref.item():.6f}, "
          f"max |grad diff| {err:.1e}")

    # 4. robust regression: y = 3 x - 1 plus noise, 10% gross outliers
    x = torch.randn(256, 1)
    y = 3 * x - 1 + 0.1 * torch.randn(256, 1)
    y[::10] += 20
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    for step in range(steps):
        loss = huber(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == steps - 1:
            print(f"step {step:4d}  huber loss {loss.item():.4f}")
    w, b = model.weight.item(), model.bias.item()
    A = torch.cat([x, torch.ones_like(x)], dim=1)
    w_ls, b_ls = torch.linalg.lstsq(A, y).solution.reshape(-1).tolist()
    print(f"Huber fit:         y = {w:.3f} x {'+' if b >= 0 else '-'} {abs(b):.3f}   "
          "(true: y = 3 x - 1)")
    print(f"least squares fit: y = {w_ls:.3f} x {'+' if b_ls >= 0 else '-'} {abs(b_ls):.3f}   "
          "(pulled toward the outliers)")
    good = ok and err < 1e-5 and abs(w - 3) < 0.2
    return 0 if good else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
