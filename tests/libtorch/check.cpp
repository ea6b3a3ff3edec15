// The checks of the LibTorch ops `torchclad aot` wrote for tests/libtorch/kernels (run by
// tests/test_libtorch.py): every op's outputs and gradients against the same math written with
// LibTorch ops (torch::autograd) in float32 and float64, and against central finite
// differences in float64; then the behaviour around the math: input errors as c10::Error,
// non-contiguous inputs, a second backward through a retained graph, double backward refused,
// no-grad calls, inputs left alone.
//
// Prints one line per check ("ok NAME" or "FAIL NAME: why") and "checks: N, failed: M";
// exits 1 if any failed.
// LibTorch's parts this program uses, rather than <torch/torch.h>: a third of the compile time.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <cmath>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "axpy_sq.h"
#include "encoder.h"
#include "lse_rows.h"
#include "rownorm.h"
#include "rownorm_x.h"
#include "softclip_dot.h"

namespace {

using torch::Tensor;
using Tensors = std::vector<Tensor>;
using Fn = std::function<Tensors(const Tensors&)>;

int n_checks = 0, n_failed = 0;

void report(const std::string& name, bool ok, const std::string& why = "") {
  ++n_checks;
  if (ok) {
    std::cout << "ok " << name << "\n";
  } else {
    ++n_failed;
    std::cout << "FAIL " << name << ": " << why << "\n";
  }
}

template <class... T>
Tensors tup(const std::tuple<T...>& t) {
  return std::apply([](const auto&... x) { return Tensors{x...}; }, t);
}
Tensors tup(const Tensor& t) { return {t}; }

// max |a - b| / (atol + rtol |b|) <= 1, with a message naming the worst element otherwise.
bool close(const Tensor& a, const Tensor& b, double atol, double rtol, std::string* why) {
  if (!a.defined() || !b.defined() || a.sizes() != b.sizes()) {
    std::ostringstream o;
    o << "shapes differ: " << (a.defined() ? a.sizes() : c10::IntArrayRef{}) << " vs "
      << (b.defined() ? b.sizes() : c10::IntArrayRef{});
    *why = o.str();
    return false;
  }
  if (a.numel() == 0) return true;
  const Tensor a64 = a.to(torch::kDouble), b64 = b.to(torch::kDouble);
  const Tensor ratio = (a64 - b64).abs() / (atol + rtol * b64.abs());
  const double worst = ratio.max().item<double>();
  if (worst <= 1 && !std::isnan(worst)) return true;
  const int64_t i = ratio.flatten().argmax().item<int64_t>();
  std::ostringstream o;
  o << "element " << i << ": " << a64.flatten()[i].item<double>() << " vs "
    << b64.flatten()[i].item<double>() << " (atol " << atol << ", rtol " << rtol << ")";
  *why = o.str();
  return false;
}

// loss = sum_j <out_j, r_j>: every output seeded with its own random weights.
Tensor weighted(const Tensors& outs, const Tensors& r) {
  Tensor loss = torch::zeros({}, outs[0].options());
  for (std::size_t j = 0; j < outs.size(); ++j) {
    if (at::isFloatingType(outs[j].scalar_type())) loss = loss + (outs[j] * r[j]).sum();
  }
  return loss;
}

struct Case {
  std::string name;
  Fn ours, ref;
  Tensors inputs;            // float64 (floating ones) or integer
  std::vector<bool> diff;    // inputs to differentiate
  bool float32 = true;       // the kernel has a float32 version
};

Tensors prepare(const Case& c, torch::ScalarType dt) {
  Tensors ins;
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    Tensor t = c.inputs[i];
    if (at::isFloatingType(t.scalar_type())) t = t.to(dt);
    ins.push_back(t.detach().clone().requires_grad_(c.diff[i]));
  }
  return ins;
}

Tensors diff_inputs(const Case& c, const Tensors& ins) {
  Tensors out;
  for (std::size_t i = 0; i < ins.size(); ++i) {
    if (c.diff[i]) out.push_back(ins[i]);
  }
  return out;
}

// Outputs and gradients against the LibTorch reference in float32 and float64.
void against_libtorch(const Case& c) {
  for (auto dt : {torch::kFloat, torch::kDouble}) {
    if (dt == torch::kFloat && !c.float32) continue;
    const bool f64 = dt == torch::kDouble;
    const double atol = f64 ? 1e-12 : 2e-5, rtol = f64 ? 1e-10 : 2e-5;
    const std::string tag = c.name + (f64 ? " float64" : " float32");
    Tensors a = prepare(c, dt), b = prepare(c, dt);
    Tensors oa = c.ours(a), ob = c.ref(b);
    std::string why;
    bool ok = oa.size() == ob.size();
    for (std::size_t j = 0; ok && j < oa.size(); ++j) {
      ok = oa[j].scalar_type() == ob[j].scalar_type() && close(oa[j], ob[j], atol, rtol, &why);
      if (!ok && why.empty()) why = "output " + std::to_string(j) + " has another dtype";
    }
    report(tag + " outputs vs LibTorch", ok, why);
    torch::manual_seed(7);
    Tensors r;
    for (const Tensor& o : ob) r.push_back(torch::randn(o.sizes(), o.options()).detach());
    Tensors ga = torch::autograd::grad({weighted(oa, r)}, diff_inputs(c, a));
    Tensors gb = torch::autograd::grad({weighted(ob, r)}, diff_inputs(c, b));
    ok = ga.size() == gb.size();
    for (std::size_t i = 0; ok && i < ga.size(); ++i) {
      ok = ga[i].scalar_type() == dt && close(ga[i], gb[i], atol, rtol, &why);
    }
    report(tag + " gradients vs torch::autograd", ok, why);
  }
}

// Gradients against central finite differences of the op itself, float64, every element.
void against_finite_differences(const Case& c) {
  Tensors a = prepare(c, torch::kDouble);
  Tensors outs = c.ours(a);
  torch::manual_seed(11);
  Tensors r;
  for (const Tensor& o : outs) r.push_back(torch::randn(o.sizes(), o.options()).detach());
  Tensors g = torch::autograd::grad({weighted(outs, r)}, diff_inputs(c, a));
  const double h = 1e-6;
  std::size_t k = 0;
  bool ok = true;
  std::string why;
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; ok && i < a.size(); ++i) {
    if (!c.diff[i]) continue;
    Tensor x = a[i].detach().clone();
    Tensor fd = torch::zeros_like(x);
    auto flat = x.view(-1);
    for (int64_t e = 0; e < x.numel(); ++e) {
      const double v = flat[e].item<double>();
      Tensors ins = a;
      ins[i] = x;
      flat[e] = v + h;
      const double up = weighted(c.ours(ins), r).item<double>();
      flat[e] = v - h;
      const double down = weighted(c.ours(ins), r).item<double>();
      flat[e] = v;
      fd.view(-1)[e] = (up - down) / (2 * h);
    }
    ok = close(g[k++], fd, 1e-6, 1e-6, &why);
    if (!ok) why = "input " + std::to_string(i) + ": " + why;
  }
  report(c.name + " float64 gradients vs finite differences", ok, why);
}

// `fn` raises a c10::Error whose message contains `want`.
void raises(const std::string& name, const std::function<void()>& fn, const std::string& want) {
  try {
    fn();
  } catch (const c10::Error& e) {
    const std::string msg = e.what_without_backtrace();
    report(name, msg.find(want) != std::string::npos,
           "message \"" + msg + "\" lacks \"" + want + "\"");
    return;
  } catch (const std::exception& e) {
    report(name, false, std::string("not a c10::Error: ") + e.what());
    return;
  }
  report(name, false, "no error");
}

Tensor f64(std::initializer_list<int64_t> shape) { return torch::randn(shape, torch::kDouble); }

std::vector<Case> cases() {
  torch::manual_seed(0);
  std::vector<Case> out;
  out.push_back({"lse_rows",
                 [](const Tensors& x) { return tup(torchclad_ops::lse_rows(x[0])); },
                 [](const Tensors& x) { return Tensors{torch::logsumexp(x[0], -1)}; },
                 {f64({2, 3, 5}) * 3},
                 {true}});
  out.push_back({"rownorm",
                 [](const Tensors& x) { return tup(torchclad_ops::rownorm(x[0], x[1])); },
                 [](const Tensors& x) {
                   Tensor s = (x[0] * x[0]).sum(1);
                   Tensor r = 1 / torch::sqrt(s / x[0].size(1) + 1e-5);
                   return Tensors{x[0] * r.unsqueeze(1) * x[1], s};
                 },
                 {f64({4, 6}), f64({6})},
                 {true, true}});
  out.push_back({"encoder",
                 [](const Tensors& x) { return tup(torchclad_ops::encoder(x[0], x[1], x[2])); },
                 [](const Tensors& x) {
                   const int64_t B = x[0].size(0), T = x[0].size(1), C = x[1].size(1);
                   Tensor tok = x[1].index_select(0, x[0].flatten().to(torch::kLong))
                                    .view({B, T, C});
                   Tensor pos = x[2].slice(0, 0, T);
                   return Tensors{tok * pos + tok};
                 },
                 // repeated tokens: their wte rows' gradients add up
                 {torch::tensor({{1, 3, 3}, {0, 7, 1}}, torch::kInt), f64({8, 4}), f64({5, 4})},
                 {false, true, true}});
  out.push_back({"softclip_dot",
                 [](const Tensors& x) { return tup(torchclad_ops::softclip_dot(x[0], x[1])); },
                 [](const Tensors& x) {
                   Tensor v = x[0] * x[1];
                   Tensor y = v / (1 + v.abs());
                   return Tensors{y, (y * x[0]).sum()};
                 },
                 {f64({7}) * 2, f64({7})},
                 {true, true}});
  out.push_back({"axpy_sq",
                 [](const Tensors& x) { return tup(torchclad_ops::axpy_sq(x[0], x[1])); },
                 [](const Tensors& x) { return Tensors{x[0] + 0.5 * (x[1] * x[1]).view_as(x[0])}; },
                 {f64({3, 2}), f64({6})},
                 {true, true},
                 /*float32=*/false});
  return out;
}

void behaviour() {
  using torchclad_ops::rownorm;
  const Tensor x = torch::randn({3, 5}), w = torch::randn({5});
  // input errors, with the Python bridge's messages
  raises("error: dtypes differ", [&] { rownorm(x, w.to(torch::kDouble)); },
         "input 'w' is float64 but 'x' is float32; all T* arrays must have one dtype");
  raises("error: integer tensor for T*", [&] { rownorm(x.to(torch::kInt), w); },
         "input 'x' is a int32 tensor; T* accepts float32 or float64 tensors");
  raises("error: device", [&] { rownorm(x.to(torch::kMeta), w.to(torch::kMeta)); },
         "input 'x' is on meta; torchclad kernels run on the CPU only");
  raises("error: shape check", [&] { rownorm(x, torch::randn({4})); },
         "check failed: w.size(0) == C (w.size(0) = 4, C = 5)");
  raises("error: too few dimensions", [&] { rownorm(torch::randn({15}), w); },
         "input 'x' has 1 dimension(s) (shape [15]); the spec reads x.size(1)");
  raises("error: undefined tensor", [&] { rownorm(Tensor(), w); },
         "input 'x' is an undefined tensor");
  raises("error: sparse layout", [&] { rownorm(x.to_sparse(), w); }, "has layout Sparse");
  raises("error: fixed dtype", [&] { torchclad_ops::axpy_sq(torch::zeros({3}), torch::zeros({3})); },
         "input 'y' (double*) must be a float64 tensor, got float32 (convert with "
         ".to(torch::kFloat64))");
  raises("error: size check", [&] {
    torchclad_ops::axpy_sq(torch::zeros({3}, torch::kDouble), torch::zeros({4}, torch::kDouble));
  }, "check failed: y.numel() == n (y.numel() = 3, n = 4)");
  raises("error: zero columns", [&] { torchclad_ops::lse_rows(torch::zeros({3, 0})); },
         "check failed: C > 0 (C = 0)");
  const Tensor wte = torch::randn({8, 4}), wpe = torch::randn({5, 4});
  raises("error: index out of range", [&] {
    torchclad_ops::encoder(torch::tensor({{1, 8}}, torch::kInt), wte, wpe);
  }, "input 'idx' holds 8 at flat position 1; expected indices in [0, 8) (wte.size(0))");
  raises("error: negative index", [&] {
    torchclad_ops::encoder(torch::tensor({{-1, 2}}, torch::kInt), wte, wpe);
  }, "input 'idx' holds -1 at flat position 0");
  raises("error: index dtype", [&] {
    torchclad_ops::encoder(torch::tensor({{1, 2}}, torch::kLong), wte, wpe);
  }, "input 'idx' (const int*) must be a int32 tensor, got int64");
  raises("error: too long a sequence", [&] {
    torchclad_ops::encoder(torch::zeros({1, 6}, torch::kInt), wte, wpe);
  }, "check failed: wpe.size(0) >= Tn (wpe.size(0) = 5, Tn = 6)");
  raises("error: input left out of --wrt requires grad", [&] {
    torchclad_ops::rownorm_x(x, w.detach().requires_grad_(true));
  }, "input 'w' requires grad, but the op has no gradient for it");

  // --wrt x: the same gradient of x as the full op, w free to not require grad
  {
    Tensor xa = x.detach().requires_grad_(true), xb = x.detach().requires_grad_(true);
    Tensor ga = torch::autograd::grad({std::get<0>(torchclad_ops::rownorm_x(xa, w)).sum()}, {xa})[0];
    Tensor gb = torch::autograd::grad({std::get<0>(rownorm(xb, w)).sum()}, {xb})[0];
    report("--wrt x: gradient of x", torch::equal(ga, gb), "differs from the full op's");
  }
  // non-contiguous inputs: same values and gradients as their contiguous copies
  {
    Tensor base = torch::randn({5, 3}, torch::kDouble);
    Tensor xt = base.t().detach().requires_grad_(true);
    Tensor xc = base.t().contiguous().requires_grad_(true);
    Tensor wd = torch::randn({10}, torch::kDouble).slice(0, 0, 10, 2);
    auto [oa, sa] = rownorm(xt, wd);
    auto [ob, sb] = rownorm(xc, wd.contiguous());
    Tensor ga = torch::autograd::grad({(oa * oa).sum() + sa.sum()}, {xt})[0];
    Tensor gb = torch::autograd::grad({(ob * ob).sum() + sb.sum()}, {xc})[0];
    report("non-contiguous inputs", torch::equal(oa, ob) && torch::equal(ga, gb),
           "results differ from the contiguous inputs'");
  }
  // a second backward through a retained graph records again: same gradients
  {
    Tensor xa = torch::randn({4, 6}, torch::kDouble).requires_grad_(true);
    Tensor wa = torch::randn({6}, torch::kDouble).requires_grad_(true);
    auto [o, s] = rownorm(xa, wa);
    Tensor loss = (o * o).sum() + s.sum();
    Tensors g1 = torch::autograd::grad({loss}, {xa, wa}, {}, /*retain_graph=*/true);
    Tensors g2 = torch::autograd::grad({loss}, {xa, wa});
    report("retain_graph: second backward", torch::equal(g1[0], g2[0]) && torch::equal(g1[1], g2[1]),
           "gradients of the second backward differ");
  }
  // only one of two outputs used: the other's gradient is zero
  {
    Tensor xa = torch::randn({4, 6}, torch::kDouble).requires_grad_(true);
    Tensor xb = xa.detach().clone().requires_grad_(true);
    Tensor ga = torch::autograd::grad({std::get<1>(rownorm(xa, torch::ones({6}, torch::kDouble))).sum()}, {xa})[0];
    report("one output used", torch::allclose(ga, 2 * xb), "d sum(ss)/dx != 2x");
  }
  // double backward: refused with a clear error
  raises("double backward refused", [&] {
    Tensor xa = torch::randn({4, 6}, torch::kDouble).requires_grad_(true);
    Tensor o = std::get<0>(rownorm(xa, torch::ones({6}, torch::kDouble)));
    Tensor g = torch::autograd::grad({(o * o).sum()}, {xa}, {}, true, /*create_graph=*/true)[0];
    torch::autograd::grad({g.sum()}, {xa});
  }, "double backward (a gradient of the gradient) is not supported");
  // no grad: the plain kernel, same values, no graph
  {
    Tensor xa = torch::randn({4, 6}).requires_grad_(true);
    Tensor with = std::get<0>(rownorm(xa, torch::ones({6})));
    torch::NoGradGuard guard;
    Tensor without = std::get<0>(rownorm(xa, torch::ones({6})));
    report("no-grad call", torch::equal(with, without) && !without.requires_grad(),
           "values differ, or the output requires grad");
  }
  {
    c10::InferenceMode guard;
    Tensor o = std::get<0>(rownorm(torch::ones({2, 3}), torch::ones({3})));
    report("inference mode", o.is_inference() && o.sizes() == c10::IntArrayRef({2, 3}),
           "not an inference tensor of shape [2, 3]");
  }
  // an input that is also an output is updated on a copy
  {
    Tensor y = torch::ones({3}, torch::kDouble), xx = torch::full({3}, 2.0, torch::kDouble);
    Tensor r = torchclad_ops::axpy_sq(y, xx);
    report("in-out input left alone", torch::equal(y, torch::ones({3}, torch::kDouble)) &&
           torch::equal(r, torch::full({3}, 3.0, torch::kDouble)), "y changed, or wrong result");
  }
  // a sweep that restores overwritten memory (softclip_dot writes y, then reads it) leaves
  // the caller's outputs as the forward returned them
  {
    Tensor xa = torch::randn({6}, torch::kDouble).requires_grad_(true);
    auto [y, s] = torchclad_ops::softclip_dot(xa, torch::ones({6}, torch::kDouble));
    Tensor before = y.detach().clone();
    (y.sum() + s).backward();
    report("outputs intact after a restoring sweep", torch::equal(y.detach(), before),
           "the sweep changed the output y");
  }
  // zero-size input
  {
    Tensor o = torchclad_ops::lse_rows(torch::zeros({0, 4}));
    report("zero rows", o.sizes() == c10::IntArrayRef({0}), "output shape is not [0]");
  }
  // the op is registered with the dispatcher under torchclad_ops::
  {
    auto h = c10::Dispatcher::singleton().findSchema({"torchclad_ops::encoder", ""});
    report("registered as torchclad_ops::encoder", h.has_value(), "no such schema");
  }
}

}  // namespace

int main() {
  for (const Case& c : cases()) {
    try {
      against_libtorch(c);
      against_finite_differences(c);
    } catch (const std::exception& e) {
      report(c.name, false, std::string("exception: ") + e.what());
    }
  }
  try {
    behaviour();
  } catch (const std::exception& e) {
    report("behaviour", false, std::string("exception: ") + e.what());
  }
  std::cout << "checks: " << n_checks << ", failed: " << n_failed << "\n";
  return n_failed == 0 ? 0 : 1;
}
