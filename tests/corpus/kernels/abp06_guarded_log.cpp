// AD-BUG-PATTERNS 6: guarded log and sqrt.  f = Σ (x_i > 0 ? log x_i + √x_i : 0)
// → ∂/∂x_i = 1/x_i + 1/(2√x_i) for x_i > 0, exactly 0 (not NaN) for x_i ≤ 0.
#include <cmath>
double abp06_guarded_log(const double* x, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += x[i] > 0.0 ? std::log(x[i]) + std::sqrt(x[i]) : 0.0;
  return s;
}
