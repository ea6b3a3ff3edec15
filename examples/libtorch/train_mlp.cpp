// A C++ training loop whose layers are torchclad ops: generated from the kernels in kernels/
// by `torchclad aot` (CMakeLists.txt runs it), their backwards the engine's generated reverse
// sweeps. No Python at run time.
//
//   y = linear(gelu(layernorm(linear(x, W1, b1), g, beta)), W2, b2),  loss = mse(y, target)
//
//   train_mlp train [--steps N]   fit a smooth function of 3 inputs with torch::optim::Adam;
//                                 exit 0 when the loss fell at least 20x
//   train_mlp check               each op's outputs and gradients against the same math in
//                                 LibTorch ops (float32, float64) and finite differences
//                                 (float64); a bad input raises a c10::Error
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "gelu.h"
#include "layernorm.h"
#include "linear.h"

namespace {

struct MLP {
  torch::Tensor w1, b1, g, beta, w2, b2;

  MLP(int64_t in, int64_t hidden, int64_t out) {
    auto param = [](torch::Tensor t) { return t.requires_grad_(true); };
    w1 = param(torch::randn({hidden, in}) / std::sqrt(double(in)));
    b1 = param(torch::zeros({hidden}));
    g = param(torch::ones({hidden}));
    beta = param(torch::zeros({hidden}));
    w2 = param(torch::randn({out, hidden}) / std::sqrt(double(hidden)));
    b2 = param(torch::zeros({out}));
  }
  std::vector<torch::Tensor> parameters() const { return {w1, b1, g, beta, w2, b2}; }

  torch::Tensor forward(const torch::Tensor& x) const {
    torch::Tensor h = torchclad_ops::linear(x, w1, b1);
    h = torchclad_ops::gelu(torchclad_ops::layernorm(h, g, beta));
    return torchclad_ops::linear(h, w2, b2);
  }
};

torch::Tensor target_fn(const torch::Tensor& x) {
  return (torch::sin(3 * x.select(1, 0)) * torch::cos(2 * x.select(1, 1)) + 0.5 * x.select(1, 2))
      .unsqueeze(1);
}

int train(int steps) {
  torch::manual_seed(0);
  MLP model(3, 32, 1);
  torch::optim::Adam opt(model.parameters(), torch::optim::AdamOptions(1e-2));
  const torch::Tensor x = torch::rand({256, 3}) * 2 - 1, y = target_fn(x);
  double first = 0, last = 0;
  for (int step = 0; step <= steps; ++step) {
    opt.zero_grad();
    torch::Tensor loss = torch::mse_loss(model.forward(x), y);
    loss.backward();  // through the generated reverse sweeps
    opt.step();
    last = loss.item<double>();
    if (step == 0) first = last;
    if (step % 50 == 0) std::cout << "step " << step << "  loss " << last << "\n";
  }
  const bool ok = last < first / 20;
  std::cout << "loss " << first << " -> " << last << (ok ? "  (fell 20x: ok)" : "  (FAILED)")
            << "\n";
  return ok ? 0 : 1;
}

// ---- check: each op against the same math in LibTorch ops

using Op = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;

bool close(const torch::Tensor& a, const torch::Tensor& b, double tol, const std::string& what) {
  const double err = (a - b).abs().max().item<double>();
  const double scale = 1 + b.abs().max().item<double>();
  const bool ok = err <= tol * scale;
  std::cout << (ok ? "ok   " : "FAIL ") << what << " (max error " << err << ")\n";
  return ok;
}

bool check_op(const std::string& name, const Op& ours, const Op& ref,
              const std::vector<torch::Tensor>& inputs) {
  bool ok = true;
  for (auto dt : {torch::kFloat, torch::kDouble}) {
    const std::string tag = name + (dt == torch::kDouble ? " float64" : " float32");
    const double tol = dt == torch::kDouble ? 1e-12 : 1e-5;
    std::vector<torch::Tensor> a, b;
    for (const auto& t : inputs) {
      a.push_back(t.to(dt).detach().requires_grad_(true));
      b.push_back(t.to(dt).detach().requires_grad_(true));
    }
    torch::Tensor oa = ours(a), ob = ref(b);
    ok &= close(oa, ob, tol, tag + " output");
    const torch::Tensor r = torch::randn(ob.sizes(), ob.options());
    auto ga = torch::autograd::grad({(oa * r).sum()}, a);
    auto gb = torch::autograd::grad({(ob * r).sum()}, b);
    for (std::size_t i = 0; i < ga.size(); ++i) {
      ok &= close(ga[i], gb[i], tol, tag + " gradient " + std::to_string(i) + " vs torch::autograd");
    }
    if (dt != torch::kDouble) continue;
    for (std::size_t i = 0; i < a.size(); ++i) {  // central differences of the op itself
      torch::NoGradGuard no_grad;
      torch::Tensor x = a[i].detach().clone(), fd = torch::zeros_like(x);
      std::vector<torch::Tensor> in(a.begin(), a.end());
      in[i] = x;
      auto flat = x.view(-1);
      for (int64_t e = 0; e < x.numel(); ++e) {
        const double v = flat[e].item<double>(), h = 1e-6;
        flat[e] = v + h;
        const double up = (ours(in) * r).sum().item<double>();
        flat[e] = v - h;
        const double down = (ours(in) * r).sum().item<double>();
        flat[e] = v;
        fd.view(-1)[e] = (up - down) / (2 * h);
      }
      ok &= close(ga[i], fd, 1e-6, tag + " gradient " + std::to_string(i) + " vs finite differences");
    }
  }
  return ok;
}

int check() {
  torch::manual_seed(1);
  bool ok = true;
  ok &= check_op("linear", [](const auto& t) { return torchclad_ops::linear(t[0], t[1], t[2]); },
                 [](const auto& t) { return torch::nn::functional::linear(t[0], t[1], t[2]); },
                 {torch::randn({2, 3, 4}), torch::randn({5, 4}), torch::randn({5})});
  ok &= check_op("layernorm",
                 [](const auto& t) { return torchclad_ops::layernorm(t[0], t[1], t[2]); },
                 [](const auto& t) {
                   return torch::layer_norm(t[0], {t[0].size(-1)}, t[1], t[2], 1e-5);
                 },
                 {torch::randn({3, 6}) * 2 + 1, torch::randn({6}), torch::randn({6})});
  ok &= check_op("gelu", [](const auto& t) { return torchclad_ops::gelu(t[0]); },
                 [](const auto& t) { return torch::gelu(t[0], "tanh"); },
                 {torch::randn({2, 7}) * 2});
  try {
    torchclad_ops::linear(torch::randn({2, 4}), torch::randn({5, 3}), torch::randn({5}));
    std::cout << "FAIL a wrong shape raised no error\n";
    ok = false;
  } catch (const c10::Error& e) {
    std::cout << "ok   a wrong shape raises: " << e.what_without_backtrace() << "\n";
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "train";
  if (mode == "check") return check();
  int steps = 300;
  if (argc > 3 && std::string(argv[2]) == "--steps") steps = std::atoi(argv[3]);
  if (mode == "train") return train(steps);
  std::cerr << "usage: train_mlp train [--steps N] | train_mlp check\n";
  return 2;
}
