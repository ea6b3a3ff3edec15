// fabs, std::abs, fmax/fmin, std::max/std::min away from ties and zero.
#include <algorithm>
#include <cmath>
double math_abs_minmax(const double* x, int n) {
  double s = 0.0;
  for (int i = 0; i + 1 < n; ++i) {
    double a = x[i];
    double b = x[i + 1];
    s += std::fabs(a) * b + std::abs(b - 0.1);
    s += std::fmax(a, b) * 2.0 - std::fmin(a * a, b);
    s += std::max(a, 0.2 * b) + 3.0 * std::min(b, a + 0.05);
  }
  return s;
}
