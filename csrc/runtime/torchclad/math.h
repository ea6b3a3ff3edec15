// Helper math used by the engine's rule table (torchclad/engine/rules/math.py).
// Every helper is templated on the value type so float kernels stay in float.
// Kinks follow PyTorch: max/min ties split evenly, sign(0) = 0.
#pragma once
#include <cmath>
#include <vector>  // per-iteration slots of parallel loops

namespace torchclad {
namespace rt {

template <class V> inline V ln2(V) { return V(0.69314718055994530942); }
template <class V> inline V ln10(V) { return V(2.30258509299404568402); }
template <class V> inline V d_sqrt(V y) { return V(0.5) / y; }
template <class V> inline V d_cbrt(V y) { return V(1) / (V(3) * y * y); }
template <class V> inline V d_tanh(V y) { return V(1) - y * y; }
template <class V> inline V d_tan(V y) { return V(1) + y * y; }
template <class V> inline V d_asin(V x) { return V(1) / std::sqrt(V(1) - x * x); }
template <class V> inline V d_atan(V x) { return V(1) / (V(1) + x * x); }
template <class A, class B> inline auto d_atan2_y(A y, B x) { return x / (x * x + y * y); }
template <class A, class B> inline auto d_atan2_x(A y, B x) { return -y / (x * x + y * y); }
template <class V> inline V d_erf(V x) { return V(1.12837916709551257390) * std::exp(-x * x); }
template <class V> inline V sign(V x) { return x > V(0) ? V(1) : (x < V(0) ? V(-1) : V(0)); }

// d/da max(a, b): 1 where a wins, 1/2 on ties (PyTorch's maximum), 0 otherwise.
template <class A, class B> inline A d_max_a(A a, B b) {
  return a > b ? A(1) : (a == b ? A(0.5) : A(0));
}
template <class A, class B> inline A d_min_a(A a, B b) {
  return a < b ? A(1) : (a == b ? A(0.5) : A(0));
}

// clamp(v, lo, hi): PyTorch's clamp passes the gradient to v on [lo, hi], to lo below it and
// to hi above it.
template <class V, class L, class H> inline V d_clamp_v(V v, L lo, H hi) {
  return (v >= lo && v <= hi) ? V(1) : V(0);
}
template <class V, class L> inline L d_clamp_lo(V v, L lo) { return v < lo ? L(1) : L(0); }
template <class V, class H> inline H d_clamp_hi(V v, H hi) { return v > hi ? H(1) : H(0); }

// pow(x, p): d/dx = p * x^(p-1), with PyTorch's convention that p == 0 gives 0.
template <class A, class B> inline auto d_pow_base(A x, B p) {
  using R = decltype(x * p);
  return p == B(0) ? R(0) : R(p * std::pow(x, p - B(1)));
}
// d/dp = x^p * log(x); PyTorch masks x == 0 (and p >= 0) to 0 instead of 0 * -inf.
template <class A, class B, class Y> inline auto d_pow_exp(A x, B p, Y y) {
  using R = decltype(x * p);
  return (x == A(0) && p >= B(0)) ? R(0) : R(y * std::log(x));
}
template <class A, class B> inline auto trunc_div(A x, B y) { return std::trunc(x / y); }

// Second derivatives: the derivatives of the helpers above, for forward over reverse.
// d_atan2_y(y, x) = x / r2 and d_atan2_x(y, x) = -y / r2 (r2 = x^2 + y^2) have the partials
// -a, b and b, a with a = 2xy / r2^2 and b = (y^2 - x^2) / r2^2.
template <class A, class B> inline auto d2_atan2_a(A y, B x) {
  auto r2 = x * x + y * y;
  return 2 * x * y / (r2 * r2);
}
template <class A, class B> inline auto d2_atan2_b(A y, B x) {
  auto r2 = x * x + y * y;
  return (y * y - x * x) / (r2 * r2);
}
// d/dx of d_pow_base(x, p) = p (p - 1) x^(p-2); 0 where d_pow_base is the constant 0 or p.
template <class A, class B> inline auto d2_pow_base_x(A x, B p) {
  using R = decltype(x * p);
  return (p == B(0) || p == B(1)) ? R(0) : R(p * (p - B(1)) * std::pow(x, p - B(2)));
}
// d/dp of d_pow_base(x, p) = x^(p-1) (1 + p log x); 0 where d_pow_base is masked (p == 0)
// and at x == 0 (PyTorch's mask of the log).
template <class A, class B> inline auto d2_pow_base_p(A x, B p) {
  using R = decltype(x * p);
  return (p == B(0) || x == A(0)) ? R(0) : R(std::pow(x, p - B(1)) * (B(1) + p * std::log(x)));
}
// d_pow_exp(x, p, y) = y log x with y = x^p given: d/dx = y / x and d/dy = log x, both
// masked where d_pow_exp is (x == 0, p >= 0).
template <class A, class B, class Y> inline auto d2_pow_exp_x(A x, B p, Y y) {
  using R = decltype(x * p);
  return (x == A(0) && p >= B(0)) ? R(0) : R(y / x);
}
template <class A, class B, class Y> inline auto d2_pow_exp_y(A x, B p, Y) {
  using R = decltype(x * p);
  return (x == A(0) && p >= B(0)) ? R(0) : R(std::log(x));
}

}  // namespace rt
}  // namespace torchclad
