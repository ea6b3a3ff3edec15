// The adjoint buffers of one op's reverse sweeps in the C++ eager path (kernel_call.cpp), and the
// pool they are reused from -- the C++ twin of torchclad/bridge/scratch.py.
//
// A sweep reads its seeds and zeroes them as it reads (Clad's convention), so once it returns they
// are scratch. For a kernel that writes every element of its outputs (zero_outputs=False: every
// built-in kernel), each output write's reverse reads and resets that element's adjoint, so the
// seeds come back all zero: kept here, one of them starts an input adjoint of the same shape and
// dtype in a later sweep (the sweep accumulates into it) instead of a freshly zero-filled buffer --
// a memory pass fewer per backward. Checked on the first seed of each (shape, dtype); a seed found
// not all zero turns the pool off for the op.
//
// Seeds: the incoming grad itself when nothing else can see it (the autograd engine handed over
// its only reference, no other tensor shares its storage, and it is contiguous, of the seed's
// dtype and shape; a view -- a grad reshaped by a view node -- only when its base is held by the
// view alone): the sweep may then reset it in place, instead of working on a copy. This is the
// test torch's AccumulateGrad makes before it steals a gradient; a grad the caller still holds
// (`y.backward(g)`, a hook, retain_grad, a view of either) has more references and is copied.
//
// An assigning sweep (kernel_call.cpp's `assigning`) reads its seeds without resetting them and
// writes every element of its input adjoints: a grad handed over alone is kept after it as
// scratch, as it is (`keep_scratch`), and starts a later assigning sweep's input adjoint of its
// shape (`scratch`), so that buffer is not new memory from the kernel every backward.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

namespace torchclad_dispatch {

class AdjointPool {
 public:
  static constexpr size_t kPerKey = 2, kKeys = 4;

  // A zero-filled buffer: from the pool, else a fresh one.
  at::Tensor zeros(at::IntArrayRef shape, at::ScalarType dtype) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (enabled_) {
        auto it = zero_.find(Key{shape.vec(), dtype});
        if (it != zero_.end() && !it->second.empty()) {
          at::Tensor t = std::move(it->second.back());
          it->second.pop_back();
          return t;
        }
      }
    }
    return at::zeros(shape, at::TensorOptions().dtype(dtype));
  }

  // A seed holding `g` (may be undefined: zeros): `g` itself when it can be taken over (see
  // above), else a contiguous copy. `g` is moved from.
  at::Tensor seed(at::Tensor&& g, at::IntArrayRef shape, at::ScalarType dtype) {
    if (!g.defined()) return zeros(shape, dtype);
    if (stealable(g, shape, dtype)) return std::move(g);
    at::Tensor s = at::empty(shape, at::TensorOptions().dtype(dtype));
    s.copy_(g);
    return s;
  }

  // A buffer whose contents do not matter (the assigning sweep writes every element): a spent
  // seed of an earlier assigning sweep, else a zero buffer, of that shape, else a fresh one (a
  // fresh multi-megabyte buffer is new pages from the kernel: measured 0.5 ms a step of the
  // modular demo GPT-2 in page faults, with GELU and residual taking the assigning sweep).
  at::Tensor scratch(at::IntArrayRef shape, at::ScalarType dtype) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto* kept : {&scratch_, &zero_}) {
        auto it = kept->find(Key{shape.vec(), dtype});
        if (it != kept->end() && !it->second.empty()) {
          at::Tensor t = std::move(it->second.back());
          it->second.pop_back();
          return t;
        }
      }
    }
    return at::empty(shape, at::TensorOptions().dtype(dtype));
  }

  // Whether a grad can be kept once its sweep is done: the autograd engine handed over its
  // only reference (see above).
  static bool owned(const at::Tensor& g) {
    return g.defined() && stealable(g, g.sizes(), g.scalar_type());
  }

  // The seeds of a finished assigning sweep (owned grads, which it only read): kept, as they
  // are, for later assigning sweeps' input adjoints.
  void keep_scratch(std::vector<at::Tensor>& seeds) {
    for (auto& t : seeds) {
      t = plain(std::move(t));
      Key key{t.sizes().vec(), t.scalar_type()};
      std::lock_guard<std::mutex> lock(mu_);
      keep(scratch_, key, std::move(t));
    }
    seeds.clear();
  }

  // The seeds of a finished sweep: kept (all zero) for later input adjoints.
  void give_back(std::vector<at::Tensor>& seeds) {
    for (auto& t : seeds) {
      t = plain(std::move(t));
      Key key{t.sizes().vec(), t.scalar_type()};
      std::lock_guard<std::mutex> lock(mu_);
      if (!enabled_) return;
      if (!checked_.count(key)) {
        if (t.any().item<bool>()) {  // the sweep does not reset every element: no pool
          enabled_ = false;
          zero_.clear();
          return;
        }
        checked_.insert(key);
      }
      keep(zero_, key, std::move(t));
    }
    seeds.clear();
  }

  void disable() {
    std::lock_guard<std::mutex> lock(mu_);
    enabled_ = false;
  }

 private:
  using Key = std::pair<std::vector<int64_t>, at::ScalarType>;

  // A grad taken over from a view node: kept as a plain tensor on its memory.
  static at::Tensor plain(at::Tensor t) {
    if (!t.is_view()) return t;
    return at::empty({0}, t.options()).set_(t.storage(), t.storage_offset(), t.sizes(),
                                            t.strides());
  }

  // t into kept[key]: at most kKeys shapes (the oldest dropped), kPerKey buffers each.
  static void keep(std::map<Key, std::vector<at::Tensor>>& kept, const Key& key, at::Tensor t) {
    auto it = kept.find(key);
    if (it == kept.end()) {
      if (kept.size() >= kKeys) kept.erase(kept.begin());
      it = kept.emplace(key, std::vector<at::Tensor>{}).first;
    }
    if (it->second.size() < kPerKey) it->second.push_back(std::move(t));
  }

  static bool stealable(const at::Tensor& g, at::IntArrayRef shape, at::ScalarType dtype) {
    if (!(g.use_count() == 1 && g.scalar_type() == dtype && g.device().is_cpu() &&
          g.layout() == at::kStrided && !g.requires_grad() && g.sizes() == shape &&
          g.is_contiguous() && !g.is_inference() && !g._fw_grad(0).defined() &&
          g.key_set().has(c10::DispatchKey::CPU) && !g.is_conj() && !g.is_neg()))
      return false;
    if (!g.is_view()) return g.storage().use_count() == 1;
    // A view (a grad reshaped by a view node): only if its base is referenced by the view alone
    // and no third tensor shares the memory.
    const at::TensorBase& base = g._base();
    return base.use_count() == 1 && !base.is_view() && g.storage().use_count() == 2;
  }

  std::mutex mu_;
  bool enabled_ = true;
  std::map<Key, std::vector<at::Tensor>> zero_;
  std::map<Key, std::vector<at::Tensor>> scratch_;  // spent seeds of assigning sweeps
  std::set<Key> checked_;
};

}  // namespace torchclad_dispatch
