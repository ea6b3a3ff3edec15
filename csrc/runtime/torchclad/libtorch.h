// torchclad runtime for LibTorch C++ programs: what the ops `torchclad aot` writes share.
//
// An op's source (torchclad.toolchain.libtorch writes it) holds the kernel, its generated
// functions and an OpInfo: the op's facts and four calls (plan: the checks, sizes and output
// shapes of a call; run: the primal kernel; record: f_reverse_forw; sweep: f_reverse_sweep).
// libtorch.cpp, compiled once per program (or, in a build without the generated
// CMakeLists.txt, into each op's source as inline functions), turns an OpInfo into the op's
// kernels:
//
//   CompositeExplicitAutograd  checks, then the primal kernel; nothing recorded
//   Autograd                   with a gradient wanted, torchclad::lt::Function (a
//                              torch::autograd::Function) whose forward runs f_reverse_forw,
//                              recording on a Tape, and whose backward runs only
//                              f_reverse_sweep on that tape; otherwise the plain kernel
//
// The behaviour is the Python bridge's (torchclad/bridge/op.py, plan.py, autograd.py): the
// same checks and messages (as c10::Error), non-contiguous inputs accepted, outputs
// zero-filled, inputs the kernel may write worked on as copies, one sweep per tape (a second
// backward through a retained graph records again from the saved inputs), double backward
// refused with a clear error.
//
// This header is light on purpose (at::Tensor and c10::Error only): every op's source
// includes it, and the heavy LibTorch headers (autograd, dispatcher) are compiled once, in
// libtorch.cpp. C++17.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "tape.h"

// Empty when libtorch.cpp is compiled on its own (the generated CMakeLists.txt); `inline` when
// an op's source includes libtorch.cpp itself (any other build).
#ifndef TORCHCLAD_LT_API
#define TORCHCLAD_LT_API
#endif

namespace c10 {
class OperatorHandle;
}
namespace torch {
class CppFunction;
}

namespace torchclad {
namespace lt {

using Tensors = std::vector<at::Tensor>;

// What plan() found for one call; an op's own Plan derives from it and adds its sizes (the
// kernel's scalar parameters). Kept from a forward for its backward.
struct PlanBase {
  virtual ~PlanBase() = default;
  at::ScalarType scalar = at::kDouble;
  std::vector<std::vector<int64_t>> out_shapes;  // the array outputs'
};

// One op, as its generated source describes it. Arrays are indexed by input (i), output (j:
// the return value, if any, is the last output) or pointer adjoint of the generated functions
// (k, in their parameter order).
struct OpInfo {
  const char* name;                 // "f"
  const char* qualname;             // "torchclad_ops::f"
  std::size_t n_in, n_out, n_adj;
  bool has_return;                  // the kernel returns a value: a 0-dim tensor, last output
  bool sweep_writes_primal;         // the sweep may restore primal memory it overwrote
  const char* const* input_names;   // [i]
  const bool* copy_input;           // [i] the kernel may write input i: it works on a copy
  const int* inout;                 // [j] output j is input inout[j], updated on its copy; -1
  const bool* diff_out;             // [j] output j is floating: seeded in backward
  const int* grad_adj;              // [i] the adjoint slot holding input i's gradient; -1
  const int* adj_output;            // [k] slot k is output adj_output[k]'s seed; -1: it starts
  const int* adj_input;             // [k] at zero, shaped like input adj_input[k]'s buffer
  std::unique_ptr<PlanBase> (*plan)(at::TensorList in);
  at::ScalarType (*out_dtype)(std::size_t j, at::ScalarType scalar);
  // b: the input buffers, o: the array outputs; the return value (or an empty Scalar)
  c10::Scalar (*run)(const PlanBase& p, const Tensors& b, const Tensors& o);
  c10::Scalar (*record)(const PlanBase& p, const Tensors& b, const Tensors& o, Tape& tape);
  // adj: one tensor per pointer adjoint; seed: the return value's
  void (*sweep)(const PlanBase& p, const Tensors& b, const Tensors& o, const Tensors& adj,
                double seed, Tape& tape);
};

// ---- the op's kernels and its call (libtorch.cpp)

// The kernel to register for `op` under CompositeExplicitAutograd (autograd = false) or
// Autograd (true): a boxed kernel, the same for every op.
TORCHCLAD_LT_API torch::CppFunction kernel(const OpInfo& op, bool autograd);
// The registered op torchclad_ops::<name>, and a call of it through the dispatcher.
TORCHCLAD_LT_API const c10::OperatorHandle* find_op(const char* qualname);
TORCHCLAD_LT_API Tensors call(const c10::OperatorHandle* op, at::TensorList in);

// ---- what plan() calls: the checks, with the Python bridge's messages (libtorch.cpp)

// An input tensor: defined, on the CPU, strided, of dtype `want`; `ctype` is the kernel
// parameter's C++ type (`const float*`), for the message.
TORCHCLAD_LT_API void check_input(const char* op, const char* name, const char* ctype,
                                  const at::Tensor& t, at::ScalarType want);
// A template kernel's scalar type: the dtype of the first template-typed input, float32 or
// float64, shared by every template-typed input (none: float64).
TORCHCLAD_LT_API at::ScalarType template_scalar(
    const char* op, const char* tparam,
    std::initializer_list<std::pair<const char*, const at::Tensor*>> inputs);
// The spec reads t.size(index): t needs the dimensions.
TORCHCLAD_LT_API void check_dims(const char* op, const char* name, const at::Tensor& t,
                                 int64_t index, const char* what);
// Every value of an integer input in [0, hi).
TORCHCLAD_LT_API void check_indices(const char* op, const char* name, const at::Tensor& t,
                                    int64_t hi, const char* hi_expr);
// Python's // and % on the spec's integers (floor), a zero divisor an error.
TORCHCLAD_LT_API int64_t floordiv(const char* op, const char* expr, int64_t a, int64_t b);
TORCHCLAD_LT_API int64_t floormod(const char* op, const char* expr, int64_t a, int64_t b);
[[noreturn]] TORCHCLAD_LT_API void size_error(const char* op, const char* name,
                                              const char* ctype, int64_t v, const char* expr);

// A size parameter's value, checked against its C++ type.
template <class I>
inline I size_param(const char* op, const char* name, const char* ctype, int64_t v,
                    const char* expr) {
  bool fits;
  if constexpr (std::is_same_v<I, bool>) {
    fits = true;
  } else if constexpr (std::is_unsigned_v<I>) {
    fits = v >= 0 &&
           static_cast<uint64_t>(v) <= static_cast<uint64_t>(std::numeric_limits<I>::max());
  } else {
    fits = v >= static_cast<int64_t>(std::numeric_limits<I>::min()) &&
           v <= static_cast<int64_t>(std::numeric_limits<I>::max());
  }
  if (!fits) size_error(op, name, ctype, v, expr);
  return static_cast<I>(v);
}

// An output's shape from pieces: dim(d) is one dimension, dims(s) the dimensions of a shape,
// dims(s, start, stop) those of s[start:stop] (Python's slice rules). Every dimension must be
// non-negative.
struct ShapePart {
  std::vector<int64_t> dims;
};
inline ShapePart dim(int64_t d) { return ShapePart{{d}}; }
inline ShapePart dims(c10::IntArrayRef s) { return ShapePart{s.vec()}; }
TORCHCLAD_LT_API ShapePart dims(c10::IntArrayRef s, int64_t start, int64_t stop);
constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();
TORCHCLAD_LT_API std::vector<int64_t> shape(const char* op, const char* output,
                                            const char* expr,
                                            std::initializer_list<ShapePart> parts);

}  // namespace lt
}  // namespace torchclad
