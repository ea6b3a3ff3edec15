"""Nine user kernels of issue #16, written as a user would (our own code), with the eager torch
code each one replaces. Used by bench_user_kernels.py.

Each :class:`Case` gives the C++ source, the ``torchclad.function`` arguments, inputs at a
realistic size (``make(scale, dtype)``: scale 1 is the benchmark size, smaller scales are for
checks) and the eager torch reference. ``note`` says where the comparison is not like for like.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    function: str
    kwargs: dict
    make: Callable[..., tuple]  # (scale, dtype, generator) -> inputs (requires_grad set)
    eager: Callable[..., Any]
    size: str
    note: str = ""
    grad_inputs: tuple = field(default=())  # positions that get gradients (default: all floating)


def _g(gen, *shape, dtype, scale=1.0, shift=0.0, grad=True):
    t = torch.randn(*shape, dtype=dtype, generator=gen) * scale + shift
    return t.requires_grad_(grad)


# ---- 1. RMSNorm: N rows of C -------------------------------------------------------------------

RMSNORM = r"""
#include <cmath>
// N rows of C channels: out = x / sqrt(mean(x^2) + eps) * w
template <typename T>
void rmsnorm(T* out, const T* x, const T* w, int N, int C) {
  for (int n = 0; n < N; n++) {
    const T* row = x + n * C;
    T ss = 0;
    for (int c = 0; c < C; c++) ss += row[c] * row[c];
    T r = T(1) / std::sqrt(ss / C + T(1e-5));
    for (int c = 0; c < C; c++) out[n * C + c] = row[c] * r * w[c];
  }
}
"""


def _rmsnorm_make(s, dtype, gen):
    n, c = max(1, 2048 // s), max(1, 2048 // s)
    return _g(gen, n, c, dtype=dtype), _g(gen, c, dtype=dtype)


# ---- 2. SwiGLU: a * sigmoid(a) * b ---------------------------------------------------------------

SWIGLU = r"""
#include <cmath>
// N elements: out = a * sigmoid(a) * b
template <typename T>
void swiglu(T* out, const T* a, const T* b, int N) {
  for (int i = 0; i < N; i++) out[i] = a[i] / (T(1) + std::exp(-a[i])) * b[i];
}
"""

# ---- 3. rotary embedding: (B, T, NH, HS), interleaved pairs -------------------------------------

ROPE = r"""
// x (B, T, NH, HS); cos, sin (T, HS / 2): pair i of each head turns by the angle of (t, i)
template <typename T>
void rope(T* out, const T* x, const T* cos, const T* sin, int B, int Tn, int NH, int HS) {
  int half = HS / 2;
  for (int b = 0; b < B; b++)
    for (int t = 0; t < Tn; t++)
      for (int h = 0; h < NH; h++) {
        int base = ((b * Tn + t) * NH + h) * HS;
        for (int i = 0; i < half; i++) {
          T x0 = x[base + 2 * i], x1 = x[base + 2 * i + 1];
          T c = cos[t * half + i], s = sin[t * half + i];
          out[base + 2 * i] = x0 * c - x1 * s;
          out[base + 2 * i + 1] = x0 * s + x1 * c;
        }
      }
}
"""


def _rope_make(s, dtype, gen):
    B, T, NH, HS = max(1, 8 // s), max(1, 256 // s), max(1, 16 // s), 64
    theta = 10000.0 ** (-torch.arange(0, HS, 2, dtype=torch.float64) / HS)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * theta[None, :]
    return (_g(gen, B, T, NH, HS, dtype=dtype), ang.cos().to(dtype), ang.sin().to(dtype))


def _rope_eager(x, cos, sin):
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)


# ---- 4. label-smoothed cross-entropy (mean over rows) -------------------------------------------

SMOOTH_CE = r"""
#include <cmath>
#include <torchclad/runtime.h>  // torchclad::detach
// logits (N, V), targets (N); loss = mean over rows of
//   logsumexp(x) - (1 - eps) x[target] - eps / V sum(x)
template <typename T>
T smooth_ce(const T* logits, const long* targets, int N, int V) {
  const T eps = T(0.1);
  T total = 0;
  for (int n = 0; n < N; n++) {
    const T* x = logits + n * V;
    T m = x[0];
    for (int v = 1; v < V; v++) m = x[v] > m ? x[v] : m;
    T shift = torchclad::detach(m);
    T se = 0, sx = 0;
    for (int v = 0; v < V; v++) {
      se += std::exp(x[v] - shift);
      sx += x[v];
    }
    T lse = shift + std::log(se);
    total += lse - (T(1) - eps) * x[targets[n]] - eps / V * sx;
  }
  return total / N;
}
"""


def _ce_make(s, dtype, gen):
    n, v = max(1, 2048 // s), max(2, 8192 // s)
    return _g(gen, n, v, dtype=dtype), torch.randint(0, v, (n,), generator=gen)


# ---- 5. conv1d, direct ----------------------------------------------------------------------------

CONV1D = r"""
// x (B, Cin, L), w (Cout, Cin, K) -> out (B, Cout, L - K + 1), no padding, stride 1
template <typename T>
void conv1d(T* out, const T* x, const T* w, int B, int Cin, int L, int Cout, int K) {
  int Lo = L - K + 1;
  for (int b = 0; b < B; b++)
    for (int o = 0; o < Cout; o++)
      for (int t = 0; t < Lo; t++) {
        T acc = 0;
        for (int c = 0; c < Cin; c++)
          for (int k = 0; k < K; k++) acc += w[(o * Cin + c) * K + k] * x[(b * Cin + c) * L + t + k];
        out[(b * Cout + o) * Lo + t] = acc;
      }
}
"""


def _conv_make(s, dtype, gen):
    B, C, L = max(1, 16 // s), max(1, 64 // s), max(8, 512 // s)
    return _g(gen, B, C, L, dtype=dtype), _g(gen, C, C, 5, dtype=dtype, scale=0.1)


# ---- 6. GRU cell: the gate arithmetic (both sides take the two matmuls from torch) --------------

GRU = r"""
#include <cmath>
// gi = x W_ih^T + b_ih, gh = h W_hh^T + b_hh, both (B, 3H) as [r | z | n]; h (B, H) -> h' (B, H)
template <typename T>
void gru_gates(T* hn, const T* gi, const T* gh, const T* h, int B, int H) {
  for (int b = 0; b < B; b++)
    for (int j = 0; j < H; j++) {
      const T* i3 = gi + b * 3 * H;
      const T* h3 = gh + b * 3 * H;
      T r = T(1) / (T(1) + std::exp(-(i3[j] + h3[j])));
      T z = T(1) / (T(1) + std::exp(-(i3[H + j] + h3[H + j])));
      T n = std::tanh(i3[2 * H + j] + r * h3[2 * H + j]);
      hn[b * H + j] = (T(1) - z) * n + z * h[b * H + j];
    }
}
"""


def _gru_make(s, dtype, gen):
    B, H = max(1, 256 // s), max(1, 1024 // s)
    return _g(gen, B, 3 * H, dtype=dtype), _g(gen, B, 3 * H, dtype=dtype), _g(gen, B, H, dtype=dtype)


def _gru_eager(gi, gh, h):
    ir, iz, inn = gi.chunk(3, 1)
    hr, hz, hn = gh.chunk(3, 1)
    r = torch.sigmoid(ir + hr)
    z = torch.sigmoid(iz + hz)
    n = torch.tanh(inn + r * hn)
    return (1 - z) * n + z * h


# ---- 7. spring chain: explicit Euler over S steps ------------------------------------------------

SPRINGS = r"""
// N masses on a line joined by springs of stiffness k (N - 1), S steps of length dt with
// damping c; x0, v0 (N) the initial state; returns the final positions in x (N), v (N).
template <typename T>
void springs(T* x, T* v, const T* x0, const T* v0, const T* k, int N, int S) {
  const T dt = T(0.01), c = T(0.05);
  for (int i = 0; i < N; i++) { x[i] = x0[i]; v[i] = v0[i]; }
  for (int s = 0; s < S; s++) {
    for (int i = 0; i < N; i++) {
      T f = -c * v[i];
      if (i > 0) f += k[i - 1] * (x[i - 1] - x[i] + T(1));
      if (i + 1 < N) f += k[i] * (x[i + 1] - x[i] - T(1));
      v[i] += dt * f;
    }
    for (int i = 0; i < N; i++) x[i] += dt * v[i];
  }
}
"""


def _springs_make(s, dtype, gen):
    n = max(2, 256 // s)
    return (torch.arange(n, dtype=dtype).add(_g(gen, n, dtype=dtype, scale=0.1, grad=False))
            .requires_grad_(), _g(gen, n, dtype=dtype, scale=0.1),
            (1 + torch.rand(n - 1, dtype=dtype, generator=gen)).requires_grad_())


def _springs_eager(x0, v0, k, steps):
    dt, c = 0.01, 0.05
    x, v = x0, v0
    for _ in range(steps):
        d = x[1:] - x[:-1]
        f = -c * v
        f = f - F.pad(k * (d - 1), (1, 0)) + F.pad(k * (d - 1), (0, 1))
        v = v + dt * f
        x = x + dt * v
    return x, v


# ---- 8. Black-Scholes call prices with erfc -------------------------------------------------------

BLACK_SCHOLES = r"""
#include <cmath>
// N options: spot S, strike K, maturity t, volatility sigma (arrays), rate r -> call price
template <typename T>
void black_scholes(T* price, const T* S, const T* K, const T* t, const T* sigma, T r, int N) {
  for (int i = 0; i < N; i++) {
    T st = sigma[i] * std::sqrt(t[i]);
    T d1 = (std::log(S[i] / K[i]) + (r + T(0.5) * sigma[i] * sigma[i]) * t[i]) / st;
    T d2 = d1 - st;
    T n1 = T(0.5) * std::erfc(-d1 * T(0.7071067811865476));
    T n2 = T(0.5) * std::erfc(-d2 * T(0.7071067811865476));
    price[i] = S[i] * n1 - K[i] * std::exp(-r * t[i]) * n2;
  }
}
"""


def _bs_make(s, dtype, gen):
    n = max(1, (1 << 20) // s)

    def u(lo, hi):
        return (lo + (hi - lo) * torch.rand(n, dtype=dtype, generator=gen)).requires_grad_()
    return u(80, 120), u(90, 110), u(0.1, 2.0), u(0.1, 0.5), torch.tensor(0.03, dtype=dtype,
                                                                           requires_grad=True)


def _bs_eager(S, K, t, sigma, r):
    st = sigma * torch.sqrt(t)
    d1 = (torch.log(S / K) + (r + 0.5 * sigma * sigma) * t) / st
    d2 = d1 - st
    n1 = 0.5 * torch.erfc(-d1 * 0.7071067811865476)
    n2 = 0.5 * torch.erfc(-d2 * 0.7071067811865476)
    return S * n1 - K * torch.exp(-r * t) * n2


# ---- 9. stencil: one explicit heat step on an H x W grid -----------------------------------------

STENCIL = r"""
// u (H, W) -> out (H, W): out = u + alpha * (5-point Laplacian of u) inside, u on the border
template <typename T>
void heat_step(T* out, const T* u, T alpha, int H, int W) {
  for (int i = 0; i < H; i++)
    for (int j = 0; j < W; j++) {
      int p = i * W + j;
      if (i == 0 || j == 0 || i == H - 1 || j == W - 1) {
        out[p] = u[p];
      } else {
        out[p] = u[p] + alpha * (u[p - W] + u[p + W] + u[p - 1] + u[p + 1] - T(4) * u[p]);
      }
    }
}
"""


def _stencil_make(s, dtype, gen):
    n = max(3, 2048 // s)
    return _g(gen, n, n, dtype=dtype), torch.tensor(0.2, dtype=dtype, requires_grad=True)


def _stencil_eager(u, alpha):
    inner = u[1:-1, 1:-1] + alpha * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
                                     - 4 * u[1:-1, 1:-1])
    out = u.clone()
    out[1:-1, 1:-1] = inner
    return out


STEPS = 2000

CASES = [
    Case("rmsnorm", RMSNORM, "rmsnorm", dict(inputs=["x", "w"], outputs={"out": ("N", "C")},
                                             input_shapes={"x": ("N", "C"), "w": ("C",)}),
         _rmsnorm_make, lambda x, w: F.rms_norm(x, (x.shape[-1],), w, 1e-5), "2048 x 2048"),
    Case("swiglu", SWIGLU, "swiglu", dict(inputs=["a", "b"], outputs={"out": ("N",)},
                                          input_shapes={"a": ("N",), "b": ("N",)}),
         lambda s, d, g: (_g(g, max(1, (1 << 20) // s), dtype=d),
                          _g(g, max(1, (1 << 20) // s), dtype=d)),
         lambda a, b: a * torch.sigmoid(a) * b, "2^20"),
    Case("rope", ROPE, "rope", dict(inputs=["x", "cos", "sin"], outputs={"out": ("B", "Tn", "NH", "HS")},
                                    input_shapes={"x": ("B", "Tn", "NH", "HS"), "cos": ("Tn", "half"),
                                                  "sin": ("Tn", "half")}),
         _rope_make, _rope_eager, "B8 T256 NH16 HS64", grad_inputs=(0,)),
    Case("smooth_ce", SMOOTH_CE, "smooth_ce",
         dict(inputs=["logits", "targets"], outputs={},
              input_shapes={"logits": ("N", "V"), "targets": ("N",)}),
         _ce_make, lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), "N2048 V8192",
         grad_inputs=(0,)),
    Case("conv1d", CONV1D, "conv1d",
         dict(inputs=["x", "w"], outputs={"out": lambda x, w: (x.shape[0], w.shape[0],
                                                                x.shape[2] - w.shape[2] + 1)},
              input_shapes={"x": ("B", "Cin", "L"), "w": ("Cout", "Cin", "K")}),
         _conv_make, lambda x, w: F.conv1d(x, w), "B16 C64 L512 K5",
         note="direct loops against torch's library convolution (oneDNN): the algorithm is the "
              "difference"),
    Case("gru_gates", GRU, "gru_gates",
         dict(inputs=["gi", "gh", "h"], outputs={"hn": ("B", "H")},
              input_shapes={"gi": ("B", "H3"), "gh": ("B", "H3"), "h": ("B", "H")}),
         _gru_make, _gru_eager, "B256 H1024",
         note="the gate arithmetic of a GRU cell; the two matmuls are torch's on both sides"),
    Case("springs", SPRINGS, "springs",
         dict(inputs=["x0", "v0", "k"], outputs={"x": ("N",), "v": ("N",)},
              input_shapes={"x0": ("N",), "v0": ("N",)}, sizes={"S": lambda *a: STEPS}),
         _springs_make, lambda x0, v0, k: _springs_eager(x0, v0, k, STEPS),
         f"N256, {STEPS} steps", note="a recurrence: eager is a Python loop of vector ops"),
    Case("black_scholes", BLACK_SCHOLES, "black_scholes",
         dict(inputs=["S", "K", "t", "sigma", "r"], outputs={"price": ("N",)},
              input_shapes={"S": ("N",), "K": ("N",), "t": ("N",), "sigma": ("N",)}),
         _bs_make, _bs_eager, "2^20 options (erfc)"),
    Case("stencil", STENCIL, "heat_step",
         dict(inputs=["u", "alpha"], outputs={"out": ("H", "W")}, input_shapes={"u": ("H", "W")}),
         _stencil_make, _stencil_eager, "2048 x 2048"),
]

BY_NAME = {c.name: c for c in CASES}


def build(case: Case):
    import torchclad

    return torchclad.function(case.source, case.function, **case.kwargs)


def check(case: Case, op, dtype=torch.float64, scale=16, seed=0) -> float:
    """The largest relative difference between op and eager, outputs and gradients (small
    inputs, float64; gradients of random weighted sums of the outputs)."""
    g = torch.Generator().manual_seed(seed)
    ins = case.make(scale, dtype, g)
    ins2 = tuple(t.detach().clone().requires_grad_(t.requires_grad) for t in ins)
    a, b = op(*ins), case.eager(*ins2)
    a = a if isinstance(a, tuple) else (a,)
    b = b if isinstance(b, tuple) else (b,)
    worst = 0.0
    for x, y in zip(a, b):
        worst = max(worst, float((x - y).detach().abs().max() / (y.detach().abs().max() + 1e-30)))
    ws = [torch.randn(x.shape, dtype=x.dtype, generator=g) for x in a]  # (a plain sum can have
    la = sum((w * x).sum() for w, x in zip(ws, a))  # zero gradients: the springs' k)
    lb = sum((w * y).sum() for w, y in zip(ws, b))
    diff = [i for i, t in enumerate(ins) if t.requires_grad]
    ga = torch.autograd.grad(la, [ins[i] for i in diff])
    gb = torch.autograd.grad(lb, [ins2[i] for i in diff])
    for x, y in zip(ga, gb):
        worst = max(worst, float((x - y).detach().abs().max() / (y.detach().abs().max() + 1e-30)))
    return worst

