// torchclad runtime: the single header included by generated derivative code.
//
//   #include <torchclad/runtime.h>
//
// Provides <cmath>, <cstddef>, <cstdint>, torchclad::Tape / ThreadTapes
// (tape.h) and, once it exists, the helper math of the rule table
// (torchclad::rt, math.h next to this file).  Header-only, C++17.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "tape.h"

// TORCHCLAD_WRITE_ONCE on a pointer parameter promises the engine that, during one call, each
// element of the buffer is written at most once and read only after it is written (an
// activation arena); the to-be-recorded analysis then never saves its old values. The engine
// reads it as an annotation; for the compiler it means nothing.
#ifndef TORCHCLAD_WRITE_ONCE
#define TORCHCLAD_WRITE_ONCE
#endif

// The helper math lives in math.h next to this header.  A quoted include looks
// in this header's directory first, so this picks up torchclad/math.h; before
// that file exists it resolves to the C library's <math.h>, which is harmless
// after <cmath>.  Compilers without __has_include skip it.
#if defined(__has_include)
#if __has_include("math.h")
#include "math.h"
#endif
#endif
