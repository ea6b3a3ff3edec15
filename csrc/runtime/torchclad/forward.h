// torchclad runtime: what generated forward-mode code needs besides the math helpers.
//
// clad::ValueAndPushforward<T, U> is what a pushforward of a non-void function returns (Clad's
// type, so custom pushforwards written for Clad compile unchanged): the value and its tangent.
// push_zero_array / drop_array keep a tape balanced in forward-over-reverse code, where every
// recorded array is followed by its tangent: an array without a tangent records zeros, and
// their pop is dropped.
#pragma once

#include <cstddef>
#include <vector>

#include "tape.h"

namespace clad {

template <class T, class U = T>
struct ValueAndPushforward {
  T value;
  U pushforward;
  ValueAndPushforward() = default;
  ValueAndPushforward(T v, U p) : value(v), pushforward(p) {}
};

}  // namespace clad

namespace torchclad {

template <class V>
inline void push_zero_array(Tape& tape, std::size_t n) {
  std::vector<V> zeros(n);
  tape.push_array(zeros.data(), n);
}

template <class V>
inline void drop_array(Tape& tape, std::size_t n) {
  std::vector<V> sink(n);
  tape.pop_array(sink.data(), n);
}

}  // namespace torchclad
