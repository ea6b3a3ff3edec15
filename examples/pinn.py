"""A physics-informed network (PINN) whose training step differentiates a C++ kernel twice.

The problem: steady viscous flow with the Buckley-Leverett flux (two-phase flow in porous
media) on [0, 1],

    -nu u''(x) + d/dx F(u(x)) = f(x),   u(0) = u(1) = 0,
    F(u) = u^2 / (u^2 + M (1 - u)^2),

with f manufactured from the solution u*(x) = sin(pi x). The network u_theta(x) (an MLP, tanh)
is trained so that the residual vanishes at collocation points and u vanishes at both ends.

Who differentiates what:

- u' and u'' of the network: torch.autograd (create_graph=True), through torch's tanh.
- the flux F is the C++ kernel below, a differentiable op made by torchclad.function.
  d/dx F(u(x)) = F'(u) u' is computed as torch.autograd.grad(F(u).sum(), x, create_graph=True):
  that runs the kernel's generated backward (F'(u) times the incoming gradient) as an op that
  is itself differentiable.
- loss.backward() then differentiates F'(u) u' with respect to the weights, which runs the
  kernel's generated *double backward*, the derivative of its backward: F''(u) times the
  incoming gradient and the tangent (the op's ``_hvp``: forward mode over the generated
  pullback, ``flux_pullback_pushforward``) and F'(u) times the tangent (its ``_jvp``,
  ``flux_pushforward``). So every step uses the kernel's first and second derivatives, all
  generated from the eight lines of C++ below.

With --compare the same model with F written in torch ops trains too, from the same initial
weights; in float64 the losses agree to ~1e-11 relative over the default 500 steps (the two
differ in rounding only, and training amplifies rounding slowly: over a few thousand steps,
through Adam's loss spikes, the difference grows to ~1e-5, while both converge alike).

    python examples/pinn.py [--steps 500] [--points 64] [--compare]

Why the flux and not the activation: with tanh a kernel, u'' already holds the activation's
second derivative, so the gradient of the loss w.r.t. the weights would need its *third*.
torchclad generates the first and second derivatives of a kernel and refuses a third with a
clear error ("a third derivative is not supported").
"""
from __future__ import annotations

import argparse
import math
import sys

import torch

import torchclad

FLUX = r"""
// F[i] = u^2 / (u^2 + M (1 - u)^2), the Buckley-Leverett fractional flow; N points.
template <typename T>
void flux(T* F, const T* u, T M, int N) {
    for (int i = 0; i < N; i++) {
        T a = u[i] * u[i];
        T b = (1 - u[i]) * (1 - u[i]);
        F[i] = a / (a + M * b);
    }
}
"""

NU = 0.1     # viscosity
M = 0.5      # mobility ratio of the flux


def kernel_flux():
    """The flux as a torchclad op: u -> F(u) (its backward, jvp and double backward generated)."""
    return torchclad.function(FLUX, "flux", inputs=["u"], outputs={"F": lambda u: u.shape},
                              sizes={"M": lambda u: M, "N": lambda u: u.numel()})


def torch_flux(u):
    """The same flux in torch ops (the reference)."""
    a = u * u
    b = (1 - u) * (1 - u)
    return a / (a + M * b)


def source(x: torch.Tensor) -> torch.Tensor:
    """f = -nu u*'' + F'(u*) u*' for u* = sin(pi x), with F'(u) = 2 M u (1 - u) / D^2,
    D = u^2 + M (1 - u)^2 (by hand, so the target owes nothing to either flux)."""
    s, c = torch.sin(math.pi * x), torch.cos(math.pi * x)
    d = s * s + M * (1 - s) ** 2
    return NU * math.pi ** 2 * s + 2 * M * s * (1 - s) / d ** 2 * math.pi * c


def network(seed: int, width: int = 32, dtype=torch.float64) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(1, width), torch.nn.Tanh(),
                               torch.nn.Linear(width, width), torch.nn.Tanh(),
                               torch.nn.Linear(width, 1)).to(dtype)


def loss_fn(net, flux, x: torch.Tensor, f: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
    """Mean squared residual -nu u'' + (F(u))' - f at the collocation points x, plus u at the
    two ends, squared."""
    x = x.detach().requires_grad_()
    u = net(x.unsqueeze(1)).squeeze(1)
    (up,) = torch.autograd.grad(u.sum(), x, create_graph=True)
    (upp,) = torch.autograd.grad(up.sum(), x, create_graph=True)
    # d/dx F(u(x)) through the flux's backward (each u[i] depends on x[i] only)
    (dflux,) = torch.autograd.grad(flux(u).sum(), x, create_graph=True)
    r = -NU * upp + dflux - f
    return (r * r).mean() + (net(ends.unsqueeze(1)) ** 2).mean()


def train(flux, steps: int, points: int, seed: int = 0, lr: float = 1e-3) -> tuple:
    """Train the PINN with Adam; returns (net, losses)."""
    net = network(seed)
    x = torch.linspace(0, 1, points + 2, dtype=torch.float64)[1:-1]
    f = source(x)
    ends = torch.tensor([0.0, 1.0], dtype=torch.float64)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(net, flux, x, f, ends)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return net, losses


def l2_error(net) -> float:
    """Relative L2 error against u*(x) = sin(pi x) on a fine grid."""
    xs = torch.linspace(0, 1, 401, dtype=torch.float64)
    with torch.no_grad():
        u = net(xs.unsqueeze(1)).squeeze(1)
    want = torch.sin(math.pi * xs)
    return float(torch.linalg.norm(u - want) / torch.linalg.norm(want))


def largest_relative_difference(losses, ref) -> float:
    return max(abs(a - b) / max(abs(b), 1e-300) for a, b in zip(losses, ref))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--points", type=int, default=64)
    p.add_argument("--compare", action="store_true",
                   help="also train the same model with the flux in torch ops")
    args = p.parse_args(argv)
    net, losses = train(kernel_flux(), args.steps, args.points)
    every = max(1, args.steps // 10)
    for k in range(0, args.steps, every):
        print(f"step {k:5d}  loss {losses[k]:.6e}")
    print(f"final loss {losses[-1]:.6e}, relative L2 error vs sin(pi x): {l2_error(net):.3e}")
    if args.compare:
        ref_net, ref = train(torch_flux, args.steps, args.points)
        print(f"plain torch: final loss {ref[-1]:.6e}, relative L2 error "
              f"{l2_error(ref_net):.3e}; largest relative difference of the losses over "
              f"{args.steps} steps: {largest_relative_difference(losses, ref):.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
