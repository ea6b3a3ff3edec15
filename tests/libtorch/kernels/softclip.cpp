// A custom derivative (Clad's clad::custom_derivatives): softclip(v) = v / (1 + |v|) has a
// hand-written pullback, which the generated sweep calls instead of differentiating the body.
#include <cmath>

template <typename T>
T softclip(T v) {
  return v / (1 + std::fabs(v));
}

namespace clad {
namespace custom_derivatives {
template <typename T>
void softclip_pullback(T v, T d_y, T* d_v) {
  const T a = 1 + std::fabs(v);
  *d_v += d_y / (a * a);
}
}  // namespace custom_derivatives
}  // namespace clad

// A non-void kernel (its value is the op's last output) whose loop calls softclip.
template <typename T>
T softclip_dot(T* y, const T* x, const T* w, int n) {
  T s = 0;
  for (int i = 0; i < n; i++) {
    y[i] = softclip(x[i] * w[i]);
    s += y[i] * x[i];
  }
  return s;
}
