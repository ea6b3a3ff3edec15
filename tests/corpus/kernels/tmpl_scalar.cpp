// A function template over the scalar type.
#include <cmath>
template <typename T>
T tmpl_scalar(T x, T y) {
  T a = x * y + T(0.5);
  T b = a / (T(1) + x * x);
  return b * std::sin(y) + a * a;
}
