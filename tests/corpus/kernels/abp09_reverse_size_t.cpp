// AD-BUG-PATTERNS 9: reverse loop with an unsigned counter, for (size_t i = n; i-- > 0;).
// s ← 0.5 s + x_i² from the last element to the first  →  ∂s/∂x_i = 2 x_i · 0.5^i.
#include <cstddef>
double abp09_reverse_size_t(const double* x, std::size_t n) {
  double s = 0.0;
  for (std::size_t i = n; i-- > 0;) s = s * 0.5 + x[i] * x[i];
  return s;
}
