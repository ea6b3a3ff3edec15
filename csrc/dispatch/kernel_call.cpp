// torchclad._C_dispatch: the eager path of user-kernel ops, in C++.
//
// A user kernel (torchclad.function) is a set of C entry points of one uniform signature
// (csrc/runtime/torchclad/capi.h): `int entry(const torchclad_arg* args, void* tape,
// torchclad_arg* ret)`. A KernelCall holds their addresses and what the op's spec says about the
// arguments (built by torchclad/bridge/fastpath.py), and runs a call of the op without going
// back to Python:
//
//   - checks the inputs' dtypes and devices (anything unexpected returns NotImplemented: the
//     caller then takes the Python path, whose checks explain the problem);
//   - finds the per-shape plan (output shapes, size arguments; made once per call signature by
//     the Python planner, whose shape functions and contract are the shape checks);
//   - allocates the outputs and calls the primal entry point, or, when autograd records, the
//     recording forward, and attaches a KernelBackward node: the tape, the forward's arguments
//     and its buffers (SavedVariables) -- the reverse sweep runs on the very buffers of the
//     forward, consumes the tape, and a second backward re-runs the recording forward.
//
// The node's backward runs only the reverse sweep: the assigning one when the kernel has it (a
// custom derivative's f_pullback_assign, e.g. matmul's), on uninitialised input adjoints and
// the grads as they come, else the generated one, on zeroed adjoints and seeds it may reset
// (adjoint_pool.h) -- or nothing at all where the assigning sweep would only copy each grad
// into an input's gradient (hands_on). With create_graph=True it hands the grads to
// a Python function instead (the op's registered backward, torchclad.bridge.autograd), so a
// gradient of the gradient behaves as on the Python path.

#include <ATen/ATen.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/csrc/utils/pybind.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "adjoint_pool.h"
#include "zero_fill.h"

namespace py = pybind11;
using torch::autograd::Node;
using torch::autograd::SavedVariable;
using torch::autograd::variable_list;

namespace {

extern "C" {
typedef union {
  void* p;
  long long i;
  double d;
} Arg;  // torchclad_arg (capi.h)
}
using Entry = int (*)(const Arg*, void*, Arg*);
using TapeNew = void* (*)();
using TapeFree = void (*)(void*);
using LastError = const char* (*)();

std::atomic<long> live_tapes{0};

struct Entries {  // one library (scalar type)
  Entry primal = nullptr, forw = nullptr, sweep = nullptr;
  // the assigning sweep (a custom derivative's f_pullback_assign), or null: it writes the input
  // adjoints instead of adding into them and only reads the seeds
  Entry sweep_assign = nullptr;
  TapeNew tape_new = nullptr;
  TapeFree tape_free = nullptr;
  LastError last_error = nullptr;
};

enum InputKind { kRead = 0, kCopy = 1, kScalar = 2 };
enum AdjointRole { kInput = 0, kSeed = 1, kInOut = 2, kScalarInput = 3, kScratch = 4 };

struct Plan {
  std::vector<int64_t> key;
  std::vector<std::vector<int64_t>> out_shapes;  // per output (empty for an in-out one)
  std::vector<Arg> args;                          // static arguments filled in
  std::vector<std::pair<int, py::object>> dyn;    // (param, fn(*inputs) -> converted value)
};

// What the op's spec says, fixed at construction. Holds Python objects: released under the GIL.
struct Spec {
  std::string name;
  int n_params = 0;
  std::vector<int> in_param, in_kind;
  std::vector<std::vector<at::ScalarType>> in_dtype;  // [scalar][input]
  int template_input = -1;
  std::vector<Entries> entries;  // per scalar
  std::vector<int> out_param, out_input;
  std::vector<std::vector<at::ScalarType>> out_dtype;  // [scalar][output]
  std::string codes;                                 // per param: p / i / d
  bool zero_outputs = true, has_ret = false, ret_diff = false, sweep_restores = true;
  char ret_code = 'd';
  std::vector<at::ScalarType> ret_dtype;               // per scalar
  // per adjoint (k.adjoints order): its role, the output (seeds) or input it belongs to, and
  // the input whose gradient it becomes (-1: none)
  std::vector<int> adj_role, adj_index, adj_input;
  // per adjoint, for the assigning sweep: the int parameters whose product is how many
  // elements of that input adjoint it writes (empty: all of them; {-2}: it adds into it); a
  // buffer of another size (or one it adds into) is zero-filled, a smaller one takes the
  // accumulating sweep (see extent)
  std::vector<std::vector<int>> adj_extent;
  // per adjoint: the adjoint of the seed the assigning sweep copies into it, element for
  // element, -1 for none (Derivative.assign_copies)
  std::vector<int> adj_copy;
  // the int parameters that must be >= 0 for the assigning sweep (its proof assumes so)
  std::vector<int> assign_nonneg;
  std::vector<std::vector<at::ScalarType>> adj_dtype;  // [scalar][adjoint]
  std::vector<int> diff_in, diff_out;  // diff_out: outputs with a gradient (then the result)
  py::object planner, fallback;
  // seeds and input adjoints reused from sweep to sweep (adjoint_pool.h)
  torchclad_dispatch::AdjointPool pool;
  // calls of each entry point (tests read them: stats())
  std::atomic<long> n_primal{0}, n_forw{0}, n_sweep{0}, n_sweep_assign{0}, n_handed_on{0};

  ~Spec() {
    if (Py_IsInitialized()) {
      py::gil_scoped_acquire gil;
      planner = py::object();
      fallback = py::object();
    } else {
      planner.release();
      fallback.release();
    }
  }
};

[[noreturn]] void kernel_failed(const Spec& s, const Entries& e, const char* what) {
  const char* msg = e.last_error ? e.last_error() : "";
  throw std::runtime_error("torchclad: " + s.name + ": " + what + " failed: " +
                           (msg && *msg ? msg : "unknown C++ exception"));
}

void set_value(Arg& a, char code, double v) {
  if (code == 'd')
    a.d = v;
  else
    a.i = static_cast<long long>(v);
}

// The outputs of a call: an in-out parameter's is its input's buffer (a copy), the others new
// (zero-filled unless the kernel writes every element); their addresses go into args.
template <class ShapeOf>
std::vector<at::Tensor> make_outputs(const Spec& s, int scalar, const std::vector<at::Tensor>& bufs,
                                     ShapeOf shape_of, std::vector<Arg>& args) {
  std::vector<at::Tensor> outs;
  for (size_t o = 0; o < s.out_param.size(); ++o) {
    at::Tensor out;
    if (s.out_input[o] >= 0) {
      out = bufs[s.out_input[o]];
    } else {
      auto opts = at::TensorOptions().dtype(s.out_dtype[scalar][o]);
      std::vector<int64_t> shape = shape_of(o);
      out = s.zero_outputs ? at::zeros(shape, opts) : at::empty(shape, opts);
    }
    args[s.out_param[o]].p = out.data_ptr();
    outs.push_back(std::move(out));
  }
  return outs;
}

// ---------------------------------------------------------------------------------------------
// The autograd node

class KernelBackward : public Node {
 public:
  KernelBackward(std::shared_ptr<Spec> spec, int scalar, std::vector<Arg> args, void* tape)
      : spec_(std::move(spec)), scalar_(scalar), args_(std::move(args)), tape_(tape) {
    if (tape_) ++live_tapes;
  }
  ~KernelBackward() override { free_tape(); }

  std::string name() const override { return "torchclad::" + spec_->name + "Backward"; }

  void save(const std::vector<at::Tensor>& originals, const std::vector<at::Tensor>& bufs,
            const std::vector<at::Tensor>& outs) {
    for (size_t i = 0; i < originals.size(); ++i) {
      originals_.emplace_back(originals[i], false);
      // detached: an in-out buffer is also an output of this node (no cycle through it); the
      // version counter is shared, so an in-place change is still caught on unpack
      bufs_.emplace_back(bufs[i].detach(), false);
    }
    for (const auto& o : outs) outs_.emplace_back(o, o.requires_grad());
  }

  void release_variables() override {
    originals_.clear();
    bufs_.clear();
    outs_.clear();
    free_tape();
  }

  variable_list apply(variable_list&& grads) override {
    if (at::GradMode::is_enabled()) return with_graph(grads);
    const Spec& s = *spec_;
    const Entries& e = s.entries[scalar_];
    if (hands_on(e, grads)) return handed_on(grads);
    std::vector<at::Tensor> outs;
    for (auto& o : outs_) outs.push_back(o.unpack(getptr()));
    std::vector<Arg> args = args_;
    std::vector<std::pair<at::Tensor, at::Tensor>> kept;
    if (tape_ == nullptr) {
      outs = recompute(args);  // a second backward: the recording forward again
    } else if (s.sweep_restores) {
      for (size_t o = 0; o < s.out_param.size(); ++o) kept.emplace_back(outs[o], outs[o].clone());
    }
    std::vector<at::Tensor> seeds;
    const bool assign = assigning(e, args, grads, outs);
    std::vector<at::Tensor> adj = assign ? assigned_adjoints(grads, outs, args, seeds)
                                         : adjoints(grads, outs, seeds);
    std::vector<Arg> call(args.begin(), args.end());
    if (s.has_ret) {
      Arg seed{};
      double g = 0;
      if (s.ret_diff && grads.back().defined()) g = grads.back().item<double>();
      set_value(seed, s.ret_code, g);
      call.push_back(seed);
    }
    for (auto& a : adj) {
      Arg p{};
      p.p = a.data_ptr();
      call.push_back(p);
    }
    ++spec_->n_sweep;
    if (assign) ++spec_->n_sweep_assign;
    int status = (assign ? e.sweep_assign : e.sweep)(call.data(), tape_, nullptr);
    free_tape();
    if (status != 0) kernel_failed(s, e, "the reverse sweep");
    for (auto& [buf, values] : kept)  // a raw copy back: the version counter is not bumped
      std::memcpy(buf.data_ptr(), values.data_ptr(), buf.numel() * buf.element_size());
    scratch_.clear();
    if (assign)
      spec_->pool.keep_scratch(seeds);
    else
      spec_->pool.give_back(seeds);
    variable_list res;
    for (int i : s.diff_in) {
      at::Tensor g;
      for (size_t j = 0; j < adj.size(); ++j)
        if (s.adj_input[j] == i) g = adj[j];
      res.push_back(g);
    }
    return res;
  }

 private:
  void free_tape() {
    if (tape_) {
      spec_->entries[scalar_].tape_free(tape_);
      tape_ = nullptr;
      --live_tapes;
    }
  }

  // The recording forward again, from the saved inputs, into new output buffers.
  std::vector<at::Tensor> recompute(std::vector<Arg>& args) {
    const Spec& s = *spec_;
    const Entries& e = s.entries[scalar_];
    std::vector<at::Tensor> bufs;
    for (size_t i = 0; i < bufs_.size(); ++i) {
      at::Tensor b = bufs_[i].unpack();
      if (s.in_kind[i] == kCopy) {
        b = originals_[i].unpack().clone(at::MemoryFormat::Contiguous);
        args[s.in_param[i]].p = b.data_ptr();
      }
      bufs.push_back(b);
    }
    std::vector<at::Tensor> outs = make_outputs(
        s, scalar_, bufs, [&](size_t o) { return outs_[o].unpack(getptr()).sizes().vec(); },
        args);
    scratch_ = bufs;
    void* tape = e.tape_new();
    if (!tape) throw std::bad_alloc();
    tape_ = tape;
    ++live_tapes;
    Arg ret{};
    ++spec_->n_forw;
    if (e.forw(args.data(), tape_, &ret) != 0) kernel_failed(s, e, "the recording forward");
    return outs;
  }

  // The sweep's adjoint buffers: seeds from the grads (the grad itself when nothing else sees it,
  // else a copy; zeros for a missing one), input adjoints zero-filled (from the pool of earlier
  // seeds when it has one). `seeds` receives the buffers that are scratch once the sweep is done.
  std::vector<at::Tensor> adjoints(variable_list& grads, const std::vector<at::Tensor>& outs,
                                   std::vector<at::Tensor>& seeds) {
    Spec& s = *spec_;
    std::vector<at::Tensor> adj;
    for (size_t j = 0; j < s.adj_role.size(); ++j) {
      const at::ScalarType dt = s.adj_dtype[scalar_][j];
      const int role = s.adj_role[j], idx = s.adj_index[j];
      if (role == kSeed || role == kInOut) {
        at::Tensor g = take_grad(grads, idx);
        if (role == kInOut) {  // handed out as an input's gradient: never pooled
          adj.push_back(g.defined() ? g.to(dt).clone(at::MemoryFormat::Contiguous)
                                    : at::zeros(outs[idx].sizes(), at::TensorOptions().dtype(dt)));
          continue;
        }
        adj.push_back(s.pool.seed(std::move(g), outs[idx].sizes(), dt));
        seeds.push_back(adj.back());
      } else if (role == kInput) {
        adj.push_back(s.pool.zeros(bufs_[idx].unpack().sizes(), dt));
      } else {
        adj.push_back(at::zeros({}, at::TensorOptions().dtype(dt)));
      }
    }
    return adj;
  }

  // The grad of output idx (moved out of grads; undefined when it has none).
  at::Tensor take_grad(variable_list& grads, int idx) const {
    const int k = grad_slot(grads, idx);
    return k < 0 ? at::Tensor() : std::move(grads[k]);
  }

  // The slot of output idx's grad in grads (the node's diff_out order), -1 for none.
  int grad_slot(const variable_list& grads, int idx) const {
    const Spec& s = *spec_;
    for (size_t k = 0; k < s.diff_out.size() && k < grads.size(); ++k)
      if (s.diff_out[k] == idx) return static_cast<int>(k);
    return -1;
  }

  // Whether this backward takes the assigning sweep: the kernel has one, every adjoint is a
  // seed or an array input's (an in-out buffer or a scalar's adjoint is accumulated into), and
  // the int arguments its proof assumes non-negative are. A sweep that still adds into an
  // input adjoint (extent -2: it only spares the seeds) is taken only when a grad would
  // otherwise be copied: a grad handed over alone is reset in place by the accumulating sweep
  // and then starts a later input adjoint as a zero buffer, which is cheaper than the zero
  // fill the adding variant needs.
  bool assigning(const Entries& e, const std::vector<Arg>& args, const variable_list& grads,
                 const std::vector<at::Tensor>& outs) const {
    const Spec& s = *spec_;
    if (e.sweep_assign == nullptr) return false;
    for (int role : s.adj_role)
      if (role != kSeed && role != kInput) return false;
    for (int k : s.assign_nonneg)
      if (args.at(k).i < 0) return false;
    bool writes = false;  // some input adjoint it writes rather than adds into
    for (size_t j = 0; j < s.adj_role.size(); ++j) {
      if (s.adj_role[j] != kInput) continue;
      const long long n = extent(j, args);
      if (n >= 0 && n > bufs_.at(s.adj_index[j]).unpack().numel())
        return false;  // it would write past the buffer (the proof counts whole rows)
      writes = writes || n != -2;
    }
    if (writes) return true;
    for (size_t k = 0; k < s.diff_out.size() && k < grads.size(); ++k) {
      const at::Tensor& g = grads[k];
      const int o = s.diff_out[k];
      if (g.defined() && o < static_cast<int>(outs.size()) &&
          !torchclad_dispatch::AdjointPool::owned(g))
        return true;  // a grad someone else holds: the accumulating sweep would copy it
    }
    return false;
  }

  // Whether every input's gradient is a seed's grad as it is: the assigning sweep would copy
  // each of them from one seed, element for element (the engine's proof: adj_copy), over its
  // size argument's elements, which the input and the grad both have; the grads have the
  // inputs' dtypes. Then nothing runs (as torch's add backward hands its grad on).
  bool hands_on(const Entries& e, const variable_list& grads) const {
    const Spec& s = *spec_;
    if (e.sweep_assign == nullptr || s.adj_copy.size() != s.adj_role.size()) return false;
    for (int k : s.assign_nonneg)
      if (args_.at(k).i < 0) return false;
    bool any = false;
    for (size_t j = 0; j < s.adj_role.size(); ++j) {
      if (s.adj_role[j] == kSeed) continue;
      if (s.adj_role[j] != kInput || s.adj_copy[j] < 0) return false;
      const long long n = extent(j, args_);
      if (n < 0) return false;
      if (bufs_.at(s.adj_index[j]).unpack().numel() != n) return false;
      const at::Tensor* g = grad_of(grads, s.adj_index[s.adj_copy[j]]);
      if (g != nullptr && g->defined() &&
          (g->numel() != n || g->scalar_type() != s.adj_dtype[scalar_][j]))
        return false;
      any = true;
    }
    return any;
  }

  // How many elements of input adjoint j the assigning sweep writes: the product of its size
  // arguments (Derivative.assign_extents); -1 when it writes them all (a custom
  // f_pullback_assign), -2 when it adds into it.
  long long extent(size_t j, const std::vector<Arg>& args) const {
    const Spec& s = *spec_;
    if (j >= s.adj_extent.size() || s.adj_extent[j].empty()) return -1;
    if (s.adj_extent[j].front() == -2) return -2;
    long long n = 1;
    for (int k : s.adj_extent[j]) n *= args.at(k).i;
    return n;
  }

  // The inputs' gradients when hands_on: each the grad of the seed it copies, in the input's
  // shape (undefined where that output has none: a zero gradient).
  variable_list handed_on(const variable_list& grads) {
    const Spec& s = *spec_;
    ++spec_->n_handed_on;
    variable_list res;
    for (int i : s.diff_in) {
      at::Tensor r;
      for (size_t j = 0; j < s.adj_role.size(); ++j) {
        if (s.adj_input[j] != i) continue;
        const at::Tensor* g = grad_of(grads, s.adj_index[s.adj_copy[j]]);
        if (g != nullptr && g->defined()) {
          const auto shape = bufs_[s.adj_index[j]].unpack().sizes();
          r = g->sizes() == shape ? *g : g->reshape(shape);
        }
      }
      res.push_back(r);
    }
    free_tape();
    return res;
  }

  // The grad of output idx, or null when the node has no slot for it.
  const at::Tensor* grad_of(const variable_list& grads, int idx) const {
    const int k = grad_slot(grads, idx);
    return k < 0 ? nullptr : &grads[k];
  }

  // The adjoint buffers of the assigning sweep: the grads as they come (it only reads them;
  // contiguous, of the seed's dtype: converted only when not), zeros for a missing one, and the
  // input adjoints uninitialised (it writes every element; a generated elementwise sweep writes
  // as many as its size argument says: a buffer of another size is zero-filled instead), from
  // the pool's spent seeds when it has one. `seeds` receives the grads handed over alone: kept
  // for later sweeps once this one is done.
  std::vector<at::Tensor> assigned_adjoints(variable_list& grads,
                                            const std::vector<at::Tensor>& outs,
                                            const std::vector<Arg>& args,
                                            std::vector<at::Tensor>& seeds) {
    Spec& s = *spec_;
    std::vector<at::Tensor> adj;
    for (size_t j = 0; j < s.adj_role.size(); ++j) {
      const at::ScalarType dt = s.adj_dtype[scalar_][j];
      const int idx = s.adj_index[j];
      auto opts = at::TensorOptions().dtype(dt);
      if (s.adj_role[j] == kSeed) {
        at::Tensor g = take_grad(grads, idx);
        const bool own = torchclad_dispatch::AdjointPool::owned(g) && g.scalar_type() == dt &&
                         g.sizes() == outs[idx].sizes();
        adj.push_back(g.defined() ? g.to(dt).contiguous() : at::zeros(outs[idx].sizes(), opts));
        if (own) seeds.push_back(adj.back());
      } else {
        const at::Tensor b = bufs_[idx].unpack();
        const long long ext = extent(j, args);
        if (ext == -2) {  // added into
          adj.push_back(s.pool.zeros(b.sizes(), dt));
          continue;
        }
        const bool full = ext == -1 || ext == static_cast<long long>(b.numel());
        adj.push_back(full ? s.pool.scratch(b.sizes(), dt) : at::zeros(b.sizes(), opts));
      }
    }
    return adj;
  }

  // create_graph=True: the Python backward (the registered op's), which records a graph.
  variable_list with_graph(const variable_list& grads) {
    const Spec& s = *spec_;
    py::gil_scoped_acquire gil;
    py::tuple ins(originals_.size()), outs(outs_.size()), gs(grads.size());
    for (size_t i = 0; i < originals_.size(); ++i)
      ins[i] = py::reinterpret_steal<py::object>(THPVariable_Wrap(originals_[i].unpack()));
    for (size_t o = 0; o < outs_.size(); ++o)
      outs[o] = py::reinterpret_steal<py::object>(THPVariable_Wrap(outs_[o].unpack(getptr())));
    for (size_t k = 0; k < grads.size(); ++k)
      gs[k] = grads[k].defined()
                  ? py::reinterpret_steal<py::object>(THPVariable_Wrap(grads[k]))
                  : py::none();
    py::object res = s.fallback(ins, outs, gs);
    variable_list out;
    for (int i : s.diff_in) {
      py::object g = res[py::int_(i)];
      out.push_back(g.is_none() ? at::Tensor() : THPVariable_Unpack(g.ptr()));
    }
    return out;
  }

  std::shared_ptr<Spec> spec_;
  int scalar_;
  std::vector<Arg> args_;
  void* tape_;
  std::vector<SavedVariable> originals_, bufs_, outs_;
  std::vector<at::Tensor> scratch_;  // buffers of a recomputed forward
};

// ---------------------------------------------------------------------------------------------
// The call

// Plain eager: no Python dispatch mode (fake tensors, FX, opcheck), no functorch transform
// (vmap, grad, jvp), no JIT tracing. These are the checks of torchclad.bridge.autograd.plain_call,
// read here from the same thread-local state, so that the usual call never runs them in Python.
// (A functorch transform is active while its dynamic-layer keys are in the thread's included
// dispatch keys: what torch._C._are_functorch_transforms_active reads.)
bool plain_eager() {
  const auto included = c10::impl::tls_local_dispatch_key_set().included_;
  return c10::impl::TorchDispatchModeTLS::stack_len() == 0 &&
         !included.has(c10::DispatchKey::FuncTorchDynamicLayerFrontMode) &&
         !included.has(c10::DispatchKey::FuncTorchDynamicLayerBackMode) &&
         !torch::jit::tracer::isTracing();
}

class KernelCall {
 public:
  explicit KernelCall(const py::dict& cfg) : spec_(std::make_shared<Spec>()) { configure(cfg); }

  py::object call(const py::args& args) {
    const Spec& s = *spec_;
    const size_t n = s.in_param.size();
    if (args.size() != n || !plain_eager())
      return py::reinterpret_borrow<py::object>(Py_NotImplemented);
    std::vector<at::Tensor> ins;
    ins.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      PyObject* o = args[i].ptr();
      // a Tensor or a Parameter; a subclass may mean something else (the Python path decides)
      if (!THPVariable_CheckExact(o))
        return py::reinterpret_borrow<py::object>(Py_NotImplemented);
      ins.push_back(THPVariable_Unpack(o));
    }
    int scalar = 0;
    if (s.template_input >= 0) {
      scalar = -1;
      const auto dt = ins[s.template_input].scalar_type();
      for (size_t k = 0; k < s.in_dtype.size(); ++k)
        if (s.in_dtype[k][s.template_input] == dt) scalar = static_cast<int>(k);
      if (scalar < 0) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
    }
    for (size_t i = 0; i < n; ++i) {
      const at::Tensor& t = ins[i];
      if (t.scalar_type() != s.in_dtype[scalar][i] || !t.device().is_cpu() ||
          t.layout() != at::kStrided || t._fw_grad(0).defined())
        return py::reinterpret_borrow<py::object>(Py_NotImplemented);
    }
    std::shared_ptr<Plan> plan = find_plan(scalar, ins, args);
    return run(scalar, *plan, ins, args);
  }

  long plans() const { return static_cast<long>(plans_.size()); }

  py::dict stats() const {
    py::dict d;
    d["forward"] = spec_->n_primal.load();
    d["recording_forward"] = spec_->n_forw.load();
    d["reverse_sweep"] = spec_->n_sweep.load();
    d["assigning_sweep"] = spec_->n_sweep_assign.load();  // of those, by the assigning sweep
    d["handed_on"] = spec_->n_handed_on.load();  // backwards that handed the grads on
    return d;
  }

 private:
  std::shared_ptr<Plan> find_plan(int scalar, const std::vector<at::Tensor>& ins,
                                  const py::args& args) {
    std::vector<int64_t> key{scalar};
    for (const auto& t : ins) {
      key.push_back(t.dim());
      for (auto d : t.sizes()) key.push_back(d);
    }
    for (auto& p : plans_)
      if (p->key == key) return p;
    // A new call signature: the Python planner checks it (contract, shape functions) and plans.
    py::tuple r = spec_->planner(*args);
    auto plan = std::make_shared<Plan>();
    plan->key = std::move(key);
    for (auto shape : r[0].cast<py::list>()) {
      std::vector<int64_t> dims;
      if (!shape.is_none())
        for (auto d : shape.cast<py::tuple>()) dims.push_back(d.cast<int64_t>());
      plan->out_shapes.push_back(std::move(dims));
    }
    plan->args.assign(spec_->n_params, Arg{});
    for (auto item : r[1].cast<py::dict>()) {
      const int i = item.first.cast<int>();
      if (spec_->codes[i] == 'd')
        plan->args[i].d = item.second.cast<double>();
      else
        plan->args[i].i = item.second.cast<long long>();
    }
    for (auto item : r[2].cast<py::list>()) {
      auto pair = item.cast<py::tuple>();
      plan->dyn.emplace_back(pair[0].cast<int>(), pair[1]);
    }
    if (plans_.size() >= 64) plans_.clear();
    plans_.push_back(plan);
    return plan;
  }

  py::object run(int scalar, const Plan& plan, const std::vector<at::Tensor>& ins,
                 const py::args& pyargs) {
    const Spec& s = *spec_;
    const Entries& e = s.entries[scalar];
    std::vector<Arg> args = plan.args;
    std::vector<at::Tensor> bufs;
    for (size_t i = 0; i < ins.size(); ++i) {
      const at::Tensor& t = ins[i];
      const int p = s.in_param[i];
      if (s.in_kind[i] == kScalar) {
        set_value(args[p], s.codes[p], t.item<double>());
        bufs.push_back(t);
        continue;
      }
      at::Tensor b = s.in_kind[i] == kCopy ? t.clone(at::MemoryFormat::Contiguous)
                                           : t.contiguous();
      args[p].p = b.data_ptr();
      bufs.push_back(std::move(b));
    }
    for (const auto& [p, fn] : plan.dyn) {
      py::object v = fn(*pyargs);
      if (s.codes[p] == 'd')
        args[p].d = v.cast<double>();
      else
        args[p].i = v.cast<long long>();
    }
    std::vector<at::Tensor> outs = make_outputs(
        s, scalar, bufs, [&](size_t o) { return plan.out_shapes[o]; }, args);
    bool record = false;
    if (at::GradMode::is_enabled())
      for (int i : s.diff_in) record = record || ins[i].requires_grad();
    Arg ret{};
    c10::intrusive_ptr<KernelBackward> node;
    if (record) {
      void* tape = e.tape_new();
      if (!tape) throw std::bad_alloc();
      node = c10::make_intrusive<KernelBackward>(spec_, scalar, args, tape);
      int status;
      ++spec_->n_forw;
      {
        py::gil_scoped_release nogil;
        status = e.forw(args.data(), tape, &ret);
      }
      if (status != 0) kernel_failed(s, e, "the recording forward");
    } else {
      int status;
      ++spec_->n_primal;
      {
        py::gil_scoped_release nogil;
        status = e.primal(args.data(), nullptr, &ret);
      }
      if (status != 0) kernel_failed(s, e, "the forward");
    }
    if (s.has_ret) {
      auto opts = at::TensorOptions().dtype(s.ret_dtype[scalar]);
      outs.push_back(at::scalar_tensor(s.ret_code == 'd' ? ret.d : static_cast<double>(ret.i),
                                       opts));
    }
    if (node) {
      std::vector<at::Tensor> diff_ins;
      for (int i : s.diff_in) diff_ins.push_back(ins[i]);
      node->set_next_edges(torch::autograd::collect_next_edges(diff_ins));
      for (int o : s.diff_out) torch::autograd::set_history(outs[o], node);
      node->save(ins, bufs, outs);
    }
    if (outs.size() == 1) return py::reinterpret_steal<py::object>(THPVariable_Wrap(outs[0]));
    py::tuple res(outs.size());
    for (size_t o = 0; o < outs.size(); ++o)
      res[o] = py::reinterpret_steal<py::object>(THPVariable_Wrap(outs[o]));
    return res;
  }

  static std::vector<int> ints(const py::dict& cfg, const char* k) {
    return cfg[k].cast<std::vector<int>>();
  }
  static std::vector<std::vector<at::ScalarType>> dtypes(const py::dict& cfg, const char* k) {
    std::vector<std::vector<at::ScalarType>> out;
    for (auto row : cfg[k].cast<py::list>()) {
      std::vector<at::ScalarType> r;
      for (auto d : row.cast<py::list>()) r.push_back(d.cast<at::ScalarType>());
      out.push_back(std::move(r));
    }
    return out;
  }

  void configure(const py::dict& cfg) {
    Spec& s = *spec_;
    s.name = cfg["name"].cast<std::string>();
    s.n_params = cfg["n_params"].cast<int>();
    s.in_param = ints(cfg, "in_param");
    s.in_kind = ints(cfg, "in_kind");
    s.in_dtype = dtypes(cfg, "in_dtype");
    s.template_input = cfg["template_input"].cast<int>();
    for (auto row : cfg["entries"].cast<py::list>()) {
      auto a = row.cast<std::vector<uintptr_t>>();
      Entries e;
      e.primal = reinterpret_cast<Entry>(a.at(0));
      e.forw = reinterpret_cast<Entry>(a.at(1));
      e.sweep = reinterpret_cast<Entry>(a.at(2));
      e.tape_new = reinterpret_cast<TapeNew>(a.at(3));
      e.tape_free = reinterpret_cast<TapeFree>(a.at(4));
      e.last_error = reinterpret_cast<LastError>(a.at(5));
      e.sweep_assign = reinterpret_cast<Entry>(a.at(6));
      s.entries.push_back(e);
    }
    s.out_param = ints(cfg, "out_param");
    s.out_input = ints(cfg, "out_input");
    s.out_dtype = dtypes(cfg, "out_dtype");
    s.codes = cfg["codes"].cast<std::string>();
    s.zero_outputs = cfg["zero_outputs"].cast<bool>();
    s.has_ret = cfg["has_ret"].cast<bool>();
    s.ret_diff = cfg["ret_diff"].cast<bool>();
    s.sweep_restores = cfg["sweep_restores"].cast<bool>();
    if (s.zero_outputs) s.pool.disable();  // seeds need not come back all zero
    s.ret_code = cfg["ret_code"].cast<std::string>().at(0);
    if (s.has_ret)
      for (auto& row : dtypes(cfg, "ret_dtype")) s.ret_dtype.push_back(row.at(0));
    s.adj_role = ints(cfg, "adj_role");
    s.adj_index = ints(cfg, "adj_index");
    s.adj_input = ints(cfg, "adj_input");
    s.adj_extent = cfg["adj_extent"].cast<std::vector<std::vector<int>>>();
    s.adj_copy = ints(cfg, "adj_copy");
    s.assign_nonneg = ints(cfg, "assign_nonneg");
    s.adj_dtype = dtypes(cfg, "adj_dtype");
    s.diff_in = ints(cfg, "diff_in");
    s.diff_out = ints(cfg, "diff_out");
    s.planner = cfg["planner"];
    s.fallback = cfg["fallback"];
    if (s.in_dtype.size() != s.entries.size())
      throw std::invalid_argument("KernelCall: one row of in_dtype per scalar type");
  }

  std::shared_ptr<Spec> spec_;
  std::vector<std::shared_ptr<Plan>> plans_;
};

}  // namespace

PYBIND11_MODULE(_C_dispatch, m) {
  m.doc() = "torchclad: the eager fast path of user-kernel ops (csrc/dispatch/kernel_call.cpp)";
  py::class_<KernelCall>(m, "KernelCall")
      .def(py::init<const py::dict&>())
      .def("__call__", &KernelCall::call)
      .def("plans", &KernelCall::plans)
      .def("stats", &KernelCall::stats,
           "calls of each entry point so far: forward, recording_forward, reverse_sweep (of "
           "which assigning_sweep took the assigning sweep); handed_on: backwards that "
           "handed the grads on as the inputs' gradients, running nothing");
  m.def("zero_fill", &torchclad_dispatch::zero_fill, py::arg("t"), py::arg("streaming") = -1,
        "zero the tensor t; streaming stores past the cache when it is contiguous and at least "
        "half the last-level cache (streaming=1: always, 0: never); returns whether it streamed");
  m.def("streaming_threshold", &torchclad_dispatch::streaming_threshold,
        "bytes from which zero_fill streams");
  m.def("live_tapes", [] { return live_tapes.load(); },
        "tapes held by nodes of this module whose backward has not run (for tests)");
}
