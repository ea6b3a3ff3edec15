// One op's source compiled on its own, without the generated CMakeLists.txt (so without
// TORCHCLAD_SHARED_RUNTIME: the op's source compiles the runtime in, as inline functions):
// lse_rows against torch::logsumexp, forward and gradient, float64.
#include <torch/csrc/autograd/autograd.h>
#include <torch/types.h>

#include <iostream>

#include "lse_rows.h"

int main() {
  torch::manual_seed(0);
  torch::Tensor x = torch::randn({3, 4}, torch::kDouble).requires_grad_(true);
  torch::Tensor y = torchclad_ops::lse_rows(x);
  torch::Tensor g = torch::autograd::grad({y.sum()}, {x})[0];
  torch::Tensor xr = x.detach().requires_grad_(true);
  torch::Tensor yr = torch::logsumexp(xr, -1);
  torch::Tensor gr = torch::autograd::grad({yr.sum()}, {xr})[0];
  const bool ok = torch::allclose(y, yr, 1e-12, 1e-12) && torch::allclose(g, gr, 1e-12, 1e-12);
  std::cout << (ok ? "ok standalone op" : "FAIL standalone op") << "\n";
  return ok ? 0 : 1;
}
