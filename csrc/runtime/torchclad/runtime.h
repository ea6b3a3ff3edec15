// torchclad runtime: the single header included by generated derivative code.
//
//   #include <torchclad/runtime.h>
//
// Provides <cmath>, <cstddef>, <cstdint>, torchclad::Tape / ThreadTapes
// (tape.h), the per-iteration records and partial sums of parallel loops
// (parallel.h) and, once it exists, the helper math of the rule table
// (torchclad::rt, math.h next to this file).  Header-only, C++17.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "tape.h"
#include "parallel.h"
#include "forward.h"  // clad::ValueAndPushforward, tape helpers of forward mode

// TORCHCLAD_WRITE_ONCE on a pointer parameter promises the engine that, during one call, each
// element of the buffer is written at most once and read only after it is written (an
// activation arena); the to-be-recorded analysis then never saves its old values. The engine
// reads it as an annotation; for the compiler it means nothing.
#ifndef TORCHCLAD_WRITE_ONCE
#define TORCHCLAD_WRITE_ONCE
#endif

namespace torchclad {

// Stop-gradient: the value itself, with no derivative (the engine's rule table maps it to a
// zero pullback, and the analyses treat its result as constant). For a shift the result does
// not depend on, such as the max subtracted inside a softmax or log-sum-exp.
template <class T>
inline T detach(T v) {
  return v;
}

// Iterations per segment of a `#pragma torchclad checkpoint` loop of n iterations: every(k)
// when the pragma gives one (at least 1), else ceil(sqrt(n)), so that the tape holds about
// sqrt(n) snapshots plus one segment's records.
inline long checkpoint_every(long /*n*/, long k) { return k < 1 ? 1 : k; }
inline long checkpoint_every(long n) {
  if (n <= 1) return 1;
  long k = static_cast<long>(std::sqrt(static_cast<double>(n)));
  while (k * k < n) ++k;
  while (k > 1 && (k - 1) * (k - 1) >= n) --k;
  return k;
}

}  // namespace torchclad

// The helper math lives in math.h next to this header.  A quoted include looks
// in this header's directory first, so this picks up torchclad/math.h; before
// that file exists it resolves to the C library's <math.h>, which is harmless
// after <cmath>.  Compilers without __has_include skip it.
#if defined(__has_include)
#if __has_include("math.h")
#include "math.h"
#endif
#endif
