// AD-BUG-PATTERNS 5: |x| at +0 and −0 has derivative 0 (PyTorch abs'(0) = 0).
// f = Σ 3|x_i| + 0.5|x_i|  →  3.5·sign(x_i), 0 at ±0.
#include <cmath>
double abp05_fabs_zero(const double* x, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += 3.0 * std::fabs(x[i]) + 0.5 * std::abs(x[i]);
  return s;
}
