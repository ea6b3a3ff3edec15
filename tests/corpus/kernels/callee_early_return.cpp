// Callees with early exits: a value-returning search that returns from inside its loop, and a void
// callee that writes its output and leaves with `return;` for non-positive scale.
#include <cmath>
static double first_above(const double* x, int n, double t) {
  for (int i = 0; i < n; ++i) {
    if (x[i] > t) return x[i] * t;
  }
  return -t;
}

static void scaled_copy(const double* x, double* y, int n, double scale) {
  if (scale <= 0.0) {
    for (int i = 0; i < n; ++i) y[i] = 0.0;
    return;
  }
  for (int i = 0; i < n; ++i) y[i] = scale * std::sqrt(1.0 + x[i] * x[i]);
}

double callee_early_return(const double* x, int n, double t) {
  double tmp[8];
  scaled_copy(x, tmp, n, t);
  double s = first_above(tmp, n, 1.3 * t) + first_above(x, n, 10.0);
  scaled_copy(x, tmp, n, -t);
  return s + tmp[0];
}
