// torchclad ops in a C++ program against the same functions in LibTorch (benchmarks/
// bench_libtorch.py builds and runs this; it prints one JSON object).
//
// Implementations of each function, timed in one process, interleaved round by round:
//   torchclad  the op `torchclad aot` wrote (examples/libtorch/kernels), its backward the
//              generated reverse sweep, called as torchclad_ops::<name>(...)
//   native     LibTorch's own fused op and its hand-written backward (at::gelu,
//              at::layer_norm)
//   composed   the same math in elementwise LibTorch ops, differentiated by torch::autograd
// Cases: the per-call overhead (one element, a forward without grad, and a forward+backward)
// and forward+backward at a small and a large size. Each sample is the thread's CPU time of
// `iters` calls divided by iters (one thread: torch::set_num_threads(1)); the outputs and
// gradients of the implementations are checked equal first (not timed).
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gelu.h"
#include "layernorm.h"

namespace {

using torch::Tensor;
using Tensors = std::vector<Tensor>;
using Fn = std::function<Tensor(const Tensors&)>;

double thread_cpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

Tensor gelu_composed(const Tensor& x) {
  return 0.5 * x * (1 + torch::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

Tensor layernorm_composed(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor m = x.mean(-1, true);
  Tensor d = x - m;
  Tensor v = (d * d).mean(-1, true);
  return d * torch::rsqrt(v + 1e-5) * w + b;
}

struct Impl {
  std::string name;
  Fn fn;
};

struct Case {
  std::string name, function, what;
  int64_t elements;
  bool backward;
  Tensors inputs;
  std::vector<Impl> impls;
};

// One call: forward, and with `backward` the gradients of every input (torch::autograd::grad,
// which does not accumulate into .grad).
void once(const Case& c, const Impl& impl, const Tensor& seed) {
  if (!c.backward) {
    torch::NoGradGuard no_grad;
    impl.fn(c.inputs);
    return;
  }
  Tensor y = impl.fn(c.inputs);
  torch::autograd::grad({y}, c.inputs, {seed});
}

std::string json_stats(std::vector<double> s) {
  std::sort(s.begin(), s.end());
  auto q = [&](double p) { return s[std::min(s.size() - 1, size_t(std::lround(p * (s.size() - 1))))]; };
  std::ostringstream o;
  o.precision(6);
  o << "{\"n\": " << s.size() << ", \"min\": " << s.front() << ", \"median\": " << q(0.5)
    << ", \"p10\": " << q(0.1) << ", \"p90\": " << q(0.9) << "}";
  return o.str();
}

double median(std::vector<double> s) {
  std::sort(s.begin(), s.end());
  const size_t n = s.size();
  return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

// The implementations agree (outputs and gradients, float32 tolerances) before any timing.
bool agree(const Case& c, std::string* why) {
  const Tensor seed = torch::randn(c.impls[0].fn(c.inputs).sizes());
  Tensor y0 = c.impls[0].fn(c.inputs);
  Tensors g0 = torch::autograd::grad({y0}, c.inputs, {seed});
  for (size_t k = 1; k < c.impls.size(); ++k) {
    Tensor y = c.impls[k].fn(c.inputs);
    Tensors g = torch::autograd::grad({y}, c.inputs, {seed});
    bool ok = torch::allclose(y, y0, 1e-4, 1e-5);
    for (size_t i = 0; ok && i < g.size(); ++i) ok = torch::allclose(g[i], g0[i], 1e-3, 1e-4);
    if (!ok) {
      *why = c.name + ": " + c.impls[k].name + " differs from " + c.impls[0].name;
      return false;
    }
  }
  return true;
}

std::string run_case(const Case& c, int rounds, double target_s) {
  const Tensor seed = torch::ones(c.impls[0].fn(c.inputs).sizes());
  // iterations per sample: about target_s of CPU time for the slowest implementation
  double slowest = 1e-7;
  for (const Impl& impl : c.impls) {
    for (int w = 0; w < 3; ++w) once(c, impl, seed);  // warm-up
    const double t0 = thread_cpu();
    for (int w = 0; w < 3; ++w) once(c, impl, seed);
    slowest = std::max(slowest, (thread_cpu() - t0) / 3);
  }
  const int64_t iters = std::clamp<int64_t>(int64_t(target_s / slowest), 1, 100000);
  std::map<std::string, std::vector<double>> samples;
  std::map<std::string, std::vector<double>> ratio;  // per round, impl / torchclad
  for (int r = 0; r < rounds; ++r) {
    std::map<std::string, double> round;
    for (const Impl& impl : c.impls) {
      const double t0 = thread_cpu();
      for (int64_t i = 0; i < iters; ++i) once(c, impl, seed);
      round[impl.name] = (thread_cpu() - t0) / iters;
      samples[impl.name].push_back(round[impl.name]);
    }
    for (const Impl& impl : c.impls) ratio[impl.name].push_back(round[impl.name] / round["torchclad"]);
  }
  std::ostringstream o;
  o << "{\"case\": \"" << c.name << "\", \"function\": \"" << c.function << "\", \"what\": \""
    << c.what << "\", \"elements\": " << c.elements << ", \"iters\": " << iters
    << ", \"impls\": {";
  for (size_t k = 0; k < c.impls.size(); ++k) {
    const std::string& n = c.impls[k].name;
    o << (k ? ", " : "") << "\"" << n << "\": {\"cpu_s\": " << json_stats(samples[n])
      << ", \"vs_torchclad\": " << median(ratio[n]) << "}";
  }
  o << "}}";
  return o.str();
}

std::vector<Case> cases(bool quick) {
  std::vector<Case> out;
  auto gelu_impls = std::vector<Impl>{
      {"torchclad", [](const Tensors& t) { return torchclad_ops::gelu(t[0]); }},
      {"native", [](const Tensors& t) { return torch::gelu(t[0], "tanh"); }},
      {"composed", [](const Tensors& t) { return gelu_composed(t[0]); }}};
  auto ln_impls = std::vector<Impl>{
      {"torchclad", [](const Tensors& t) { return torchclad_ops::layernorm(t[0], t[1], t[2]); }},
      {"native",
       [](const Tensors& t) { return torch::layer_norm(t[0], {t[0].size(-1)}, t[1], t[2], 1e-5); }},
      {"composed", [](const Tensors& t) { return layernorm_composed(t[0], t[1], t[2]); }}};
  auto req = [](Tensor t) { return t.requires_grad_(true); };
  const int64_t big_rows = quick ? 256 : 2048;
  for (bool bwd : {false, true}) {
    out.push_back({std::string("gelu overhead ") + (bwd ? "fwd+bwd" : "fwd (no grad)"), "gelu",
                   "1 element", 1, bwd, {req(torch::randn({1}))}, gelu_impls});
    out.push_back({std::string("layernorm overhead ") + (bwd ? "fwd+bwd" : "fwd (no grad)"),
                   "layernorm", "1 element", 1, bwd,
                   {req(torch::randn({1, 1})), req(torch::randn({1})), req(torch::randn({1}))},
                   ln_impls});
  }
  out.push_back({"gelu small fwd+bwd", "gelu", "16 x 64", 16 * 64, true,
                 {req(torch::randn({16, 64}))}, gelu_impls});
  out.push_back({"gelu large fwd+bwd", "gelu", std::to_string(big_rows) + " x 768",
                 big_rows * 768, true, {req(torch::randn({big_rows, 768}))}, gelu_impls});
  out.push_back({"layernorm small fwd+bwd", "layernorm", "16 x 64", 16 * 64, true,
                 {req(torch::randn({16, 64})), req(torch::randn({64})), req(torch::randn({64}))},
                 ln_impls});
  out.push_back({"layernorm large fwd+bwd", "layernorm", std::to_string(big_rows) + " x 768",
                 big_rows * 768, true,
                 {req(torch::randn({big_rows, 768})), req(torch::randn({768})),
                  req(torch::randn({768}))},
                 ln_impls});
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  torch::set_num_threads(1);
  torch::manual_seed(0);
  const int rounds = quick ? 5 : 15;
  const double target_s = quick ? 0.01 : 0.03;
  std::cout << "{\"rounds\": " << rounds << ", \"threads\": " << torch::get_num_threads()
            << ", \"cases\": [";
  bool first = true;
  for (const Case& c : cases(quick)) {
    std::string why;
    if (!agree(c, &why)) {
      std::cerr << "implementations disagree: " << why << "\n";
      return 1;
    }
    std::cout << (first ? "" : ",\n") << run_case(c, rounds, target_s) << std::flush;
    first = false;
  }
  std::cout << "]}\n";
  return 0;
}
