// torchclad runtime for LibTorch C++ programs: the op kernels, the torch::autograd::Function
// and the checks every op written by `torchclad aot` shares (see libtorch.h). Compiled once
// per program: the generated CMakeLists.txt adds it to the torchclad_ops target (and defines
// TORCHCLAD_SHARED_RUNTIME for the ops). In any other build each op's source includes this
// file with TORCHCLAD_LT_API defined as `inline` (slower to compile, same program).
#include "libtorch.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

namespace torchclad {
namespace lt {
namespace detail {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// float32 / float64 / int64 ...: a dtype as the Python bridge's messages spell it.
inline const char* dtype_name(at::ScalarType s) {
  switch (s) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kInt: return "int32";
    case at::kLong: return "int64";
    case at::kShort: return "int16";
    case at::kChar: return "int8";
    case at::kByte: return "uint8";
    case at::kBool: return "bool";
    default: return c10::toString(s);
  }
}

// torch::kFloat32 ...: the C++ spelling of a dtype, for the hint in a message.
inline std::string dtype_cpp(at::ScalarType s) {
  std::string n = dtype_name(s);
  if (!n.empty() && n[0] >= 'a' && n[0] <= 'z') n[0] = static_cast<char>(n[0] - 'a' + 'A');
  return "torch::k" + n;
}

inline std::string shape_str(c10::IntArrayRef s) {
  std::ostringstream o;
  o << "[";
  for (std::size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
}

template <class I>
inline void check_index_values(const char* op, const char* name, const I* p, int64_t n,
                               int64_t hi, const char* hi_expr) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = static_cast<int64_t>(p[i]);
    TORCH_CHECK_INDEX(v >= 0 && v < hi, op, ": input '", name, "' holds ", v,
                      " at flat position ", i, "; expected indices in [0, ", hi, ") (", hi_expr,
                      ")");
  }
}

// ---- one call's buffers

// The input buffers the kernel runs on: inputs it only reads, contiguous (no copy when they
// already are); inputs it may write, copied.
inline Tensors input_buffers(const OpInfo& op, at::TensorList in) {
  Tensors bufs(op.n_in);
  for (std::size_t i = 0; i < op.n_in; ++i) {
    bufs[i] = op.copy_input[i] ? in[i].clone(at::MemoryFormat::Contiguous) : in[i].contiguous();
  }
  return bufs;
}

inline std::size_t n_arrays(const OpInfo& op) { return op.n_out - (op.has_return ? 1 : 0); }

// The array outputs, zero-filled (an in-out output is its input's buffer).
inline Tensors output_buffers(const OpInfo& op, const PlanBase& plan, const Tensors& bufs) {
  Tensors outs(n_arrays(op));
  for (std::size_t j = 0; j < outs.size(); ++j) {
    outs[j] = op.inout[j] >= 0
                  ? bufs[op.inout[j]]
                  : at::zeros(plan.out_shapes[j],
                              at::TensorOptions().dtype(op.out_dtype(j, plan.scalar)));
  }
  return outs;
}

inline void append_return(const OpInfo& op, Tensors& outs, const PlanBase& plan,
                          const c10::Scalar& r) {
  if (op.has_return) {
    outs.push_back(at::scalar_tensor(
        r, at::TensorOptions().dtype(op.out_dtype(op.n_out - 1, plan.scalar))));
  }
}

// The CompositeExplicitAutograd kernel: no gradient wanted, nothing recorded.
inline Tensors plain(const OpInfo& op, at::TensorList in) {
  const std::unique_ptr<PlanBase> plan = op.plan(in);
  const Tensors bufs = input_buffers(op, in);
  Tensors outs = output_buffers(op, *plan, bufs);
  const c10::Scalar ret = op.run(*plan, bufs, outs);
  append_return(op, outs, *plan, ret);
  return outs;
}

// ---- autograd

// What one forward leaves for its backward: the op, its plan and the tape f_reverse_forw
// filled (consumed by the first sweep).
struct Record : torch::CustomClassHolder {
  const OpInfo* op = nullptr;
  std::unique_ptr<PlanBase> plan;
  Tape tape;
  bool consumed = false;
};
inline constexpr const char* kRecord = "torchclad_record";

// Gradients of the gradient are refused, as in Python: with create_graph the input gradients
// pass through this node, whose backward raises.
struct RefuseDoubleBackward : torch::autograd::Function<RefuseDoubleBackward> {
  static variable_list forward(AutogradContext* ctx, const OpInfo* op, at::TensorList grads,
                               at::TensorList) {
    ctx->saved_data["op"] = std::string(op->qualname);
    return grads.vec();
  }
  static variable_list backward(AutogradContext* ctx, variable_list) {
    TORCH_CHECK(false, ctx->saved_data["op"].toStringRef(),
                ": double backward (a gradient of the gradient) is not supported: the engine "
                "generates first-order reverse mode only. Use create_graph=false, or LibTorch "
                "ops for higher-order derivatives.");
    return {};
  }
};

struct Function : torch::autograd::Function<Function> {
  // Saved: the inputs (to record again), the forward's input buffers, its outputs.
  static variable_list forward(AutogradContext* ctx, const OpInfo* op, at::TensorList in) {
    auto rec = c10::make_intrusive<Record>();
    rec->op = op;
    rec->plan = op->plan(in);
    const Tensors bufs = input_buffers(*op, in);
    Tensors outs = output_buffers(*op, *rec->plan, bufs);
    const c10::Scalar ret = op->record(*rec->plan, bufs, outs, rec->tape);
    append_return(*op, outs, *rec->plan, ret);
    variable_list saved(in.begin(), in.end());
    saved.insert(saved.end(), bufs.begin(), bufs.end());
    saved.insert(saved.end(), outs.begin(), outs.end());
    ctx->save_for_backward(saved);
    ctx->saved_data[kRecord] = c10::IValue::make_capsule(rec);
    variable_list frozen;
    for (std::size_t j = 0; j < op->n_out; ++j) {
      if (!op->diff_out[j]) frozen.push_back(outs[j]);
    }
    if (!frozen.empty()) ctx->mark_non_differentiable(frozen);
    return outs;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto rec = c10::static_intrusive_pointer_cast<Record>(ctx->saved_data.at(kRecord).toCapsule());
    const OpInfo& op = *rec->op;
    const variable_list saved = ctx->get_saved_variables();
    const std::size_t n_in = op.n_in;
    const Tensors in(saved.begin(), saved.begin() + n_in);
    Tensors bufs(saved.begin() + n_in, saved.begin() + 2 * n_in);
    Tensors outs(saved.begin() + 2 * n_in, saved.begin() + 2 * n_in + n_arrays(op));
    c10::intrusive_ptr<Record> fresh;
    std::vector<std::pair<at::Tensor, at::Tensor>> kept;
    if (rec->consumed) {
      // One sweep consumes a tape: a second backward (retain_graph) records again.
      fresh = c10::make_intrusive<Record>();
      fresh->plan = op.plan(in);
      bufs = input_buffers(op, in);
      outs = output_buffers(op, *fresh->plan, bufs);
      op.record(*fresh->plan, bufs, outs, fresh->tape);
    } else if (op.sweep_writes_primal) {
      // The sweep may restore memory the forward overwrote, outputs included: those are the
      // caller's tensors, so their values are put back afterwards.
      for (const at::Tensor& o : outs) kept.emplace_back(o, o.clone());
    }
    Record& r = fresh ? *fresh : *rec;
    rec->consumed = true;
    // Seeds: copies of the incoming grads (the sweep zeroes them as it reads them).
    Tensors seeds(op.n_out);
    for (std::size_t j = 0; j < op.n_out; ++j) {
      if (!op.diff_out[j]) continue;
      const at::ScalarType dt = op.out_dtype(j, r.plan->scalar);
      const bool is_return = op.has_return && j == op.n_out - 1;
      seeds[j] = grads[j].defined()
                     ? grads[j].detach().to(dt).clone(at::MemoryFormat::Contiguous)
                     : at::zeros(is_return ? std::vector<int64_t>{} : r.plan->out_shapes[j],
                                 at::TensorOptions().dtype(dt));
    }
    const double seed = (op.has_return && op.diff_out[op.n_out - 1])
                            ? seeds[op.n_out - 1].item().toDouble()
                            : 0.0;
    Tensors adj(op.n_adj);
    for (std::size_t k = 0; k < op.n_adj; ++k) {
      adj[k] = op.adj_output[k] >= 0
                   ? seeds[op.adj_output[k]]
                   : at::zeros_like(bufs[op.adj_input[k]], at::MemoryFormat::Contiguous);
    }
    op.sweep(*r.plan, bufs, outs, adj, seed, r.tape);
    r.tape.clear();
    for (auto& kv : kept) {
      std::memcpy(kv.first.data_ptr(), kv.second.data_ptr(), kv.first.nbytes());
    }
    variable_list res(1 + n_in);  // the OpInfo argument has no gradient
    for (std::size_t i = 0; i < n_in; ++i) {
      if (op.grad_adj[i] >= 0) res[1 + i] = adj[op.grad_adj[i]];
    }
    if (torch::autograd::GradMode::is_enabled()) {
      // create_graph: tie the gradients to the inputs through a node that refuses to go on.
      variable_list defined;
      for (std::size_t i = 0; i < n_in; ++i) {
        if (res[1 + i].defined()) defined.push_back(res[1 + i]);
      }
      // (TensorLists: apply() sees the tensors of TensorList arguments, not of vectors)
      const variable_list tied =
          RefuseDoubleBackward::apply(&op, at::TensorList(defined), at::TensorList(in));
      std::size_t k = 0;
      for (std::size_t i = 0; i < n_in; ++i) {
        if (res[1 + i].defined()) res[1 + i] = tied[k++];
      }
    }
    return res;
  }
};

// The Autograd kernel: Function when a gradient is wanted, the plain kernel otherwise. An
// input that requires grad but has no generated gradient (left out of --wrt) is an error: a
// silent zero gradient would be a wrong answer.
inline Tensors autograd(const OpInfo& op, at::TensorList in) {
  bool wanted = false;
  if (torch::autograd::GradMode::is_enabled()) {
    for (std::size_t i = 0; i < op.n_in; ++i) {
      if (!in[i].defined() || !in[i].requires_grad()) continue;
      TORCH_CHECK(op.grad_adj[i] >= 0, op.name, ": input '", op.input_names[i],
                  "' requires grad, but the op has no gradient for it (it was generated "
                  "without it in --wrt); regenerate with it in --wrt, or pass ",
                  op.input_names[i], ".detach()");
      wanted = true;
    }
  }
  if (!wanted) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return plain(op, in);
  }
  return Function::apply(&op, in);
}

// One boxed kernel for every op: the inputs from the stack, the outputs onto it.
class Kernel final : public c10::OperatorKernel {
 public:
  Kernel(const OpInfo* op, bool autograd) : op_(op), autograd_(autograd) {}
  void operator()(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack* stack) {
    const std::size_t n = op_->n_in;
    Tensors in;
    in.reserve(n);
    for (std::size_t i = stack->size() - n; i < stack->size(); ++i) {
      in.push_back((*stack)[i].isNone() ? at::Tensor() : (*stack)[i].toTensor());
    }
    torch::jit::drop(*stack, n);
    Tensors outs = autograd_ ? autograd(*op_, in) : plain(*op_, in);
    for (at::Tensor& o : outs) stack->emplace_back(std::move(o));
  }

 private:
  const OpInfo* op_;
  bool autograd_;
};

}  // namespace detail

using detail::check_index_values;
using detail::dtype_cpp;
using detail::dtype_name;
using detail::shape_str;

TORCHCLAD_LT_API torch::CppFunction kernel(const OpInfo& op, bool autograd) {
  return torch::CppFunction::makeFromBoxedFunctor(std::make_unique<detail::Kernel>(&op, autograd));
}

TORCHCLAD_LT_API const c10::OperatorHandle* find_op(const char* qualname) {
  // kept for the program's lifetime, like the registration itself
  return new c10::OperatorHandle(c10::Dispatcher::singleton().findSchemaOrThrow(qualname, ""));
}

TORCHCLAD_LT_API Tensors call(const c10::OperatorHandle* op, at::TensorList in) {
  torch::jit::Stack stack(in.begin(), in.end());
  op->callBoxed(stack);
  Tensors out;
  out.reserve(stack.size());
  for (c10::IValue& v : stack) out.push_back(std::move(v).toTensor());
  return out;
}

// ---- the checks

TORCHCLAD_LT_API void check_input(const char* op, const char* name, const char* ctype,
                                  const at::Tensor& t, at::ScalarType want) {
  TORCH_CHECK(t.defined(), op, ": input '", name, "' is an undefined tensor; pass a ",
              dtype_name(want), " tensor");
  TORCH_CHECK(t.device().is_cpu(), op, ": input '", name, "' is on ", t.device(),
              "; torchclad kernels run on the CPU only (move it with .cpu())");
  TORCH_CHECK(t.layout() == at::kStrided, op, ": input '", name, "' has layout ", t.layout(),
              "; torchclad kernels read dense (strided) tensors (convert with .to_dense())");
  TORCH_CHECK_TYPE(t.scalar_type() == want, op, ": input '", name, "' (", ctype,
                   ") must be a ", dtype_name(want), " tensor, got ",
                   dtype_name(t.scalar_type()), " (convert with .to(", dtype_cpp(want), "))");
}

TORCHCLAD_LT_API at::ScalarType template_scalar(
    const char* op, const char* tparam,
    std::initializer_list<std::pair<const char*, const at::Tensor*>> inputs) {
  const char* first = nullptr;
  at::ScalarType chosen = at::kDouble;
  for (const auto& in : inputs) {
    const at::Tensor& t = *in.second;
    if (!t.defined()) continue;  // check_input says so
    const at::ScalarType s = t.scalar_type();
    TORCH_CHECK_TYPE(s == at::kFloat || s == at::kDouble, op, ": input '", in.first, "' is a ",
                     dtype_name(s), " tensor; ", tparam, "* accepts float32 or float64 tensors");
    if (first == nullptr) {
      first = in.first;
      chosen = s;
    } else {
      TORCH_CHECK_TYPE(s == chosen, op, ": input '", in.first, "' is ", dtype_name(s), " but '",
                       first, "' is ", dtype_name(chosen), "; all ", tparam,
                       "* arrays must have one dtype (convert with .to(", dtype_cpp(chosen), "))");
    }
  }
  return chosen;
}

TORCHCLAD_LT_API void check_dims(const char* op, const char* name, const at::Tensor& t,
                                 int64_t index, const char* what) {
  const int64_t need = index >= 0 ? index + 1 : -index;
  TORCH_CHECK_INDEX(t.dim() >= need, op, ": input '", name, "' has ", t.dim(),
                    " dimension(s) (shape ", shape_str(t.sizes()), "); the spec reads ", what,
                    ", which needs at least ", need);
}

TORCHCLAD_LT_API void check_indices(const char* op, const char* name, const at::Tensor& t,
                                    int64_t hi, const char* hi_expr) {
  const at::Tensor c = t.contiguous();
  const int64_t n = c.numel();
  switch (c.scalar_type()) {
    case at::kInt: return check_index_values(op, name, c.data_ptr<int32_t>(), n, hi, hi_expr);
    case at::kLong: return check_index_values(op, name, c.data_ptr<int64_t>(), n, hi, hi_expr);
    case at::kShort: return check_index_values(op, name, c.data_ptr<int16_t>(), n, hi, hi_expr);
    case at::kChar: return check_index_values(op, name, c.data_ptr<int8_t>(), n, hi, hi_expr);
    case at::kByte: return check_index_values(op, name, c.data_ptr<uint8_t>(), n, hi, hi_expr);
    default:
      TORCH_CHECK_TYPE(false, op, ": input '", name, "' is a ", dtype_name(c.scalar_type()),
                       " tensor; index inputs are integer tensors");
  }
}

TORCHCLAD_LT_API int64_t floordiv(const char* op, const char* expr, int64_t a, int64_t b) {
  TORCH_CHECK_VALUE(b != 0, op, ": the spec divides by zero in ", expr);
  const int64_t q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}

TORCHCLAD_LT_API int64_t floormod(const char* op, const char* expr, int64_t a, int64_t b) {
  return a - floordiv(op, expr, a, b) * b;
}

[[noreturn]] TORCHCLAD_LT_API void size_error(const char* op, const char* name,
                                              const char* ctype, int64_t v, const char* expr) {
  TORCH_CHECK_VALUE(false, op, ": sizes['", name, "'] = ", expr, " = ", v,
                    " does not fit the parameter's type ", ctype);
  std::abort();  // unreachable: TORCH_CHECK_VALUE(false, ...) throws
}

TORCHCLAD_LT_API ShapePart dims(c10::IntArrayRef s, int64_t start, int64_t stop) {
  const int64_t n = static_cast<int64_t>(s.size());
  auto clamp = [n](int64_t i) { return std::min(n, std::max<int64_t>(0, i < 0 ? i + n : i)); };
  ShapePart p;
  for (int64_t i = clamp(start); i < clamp(stop); ++i) p.dims.push_back(s[i]);
  return p;
}

TORCHCLAD_LT_API std::vector<int64_t> shape(const char* op, const char* output,
                                            const char* expr,
                                            std::initializer_list<ShapePart> parts) {
  std::vector<int64_t> s;
  for (const ShapePart& p : parts) s.insert(s.end(), p.dims.begin(), p.dims.end());
  for (int64_t d : s) {
    TORCH_CHECK_VALUE(d >= 0, op, ": output '", output, "' would have shape ", shape_str(s),
                      " (", expr, "); a dimension is negative");
  }
  return s;
}

}  // namespace lt
}  // namespace torchclad
