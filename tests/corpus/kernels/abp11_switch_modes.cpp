// AD-BUG-PATTERNS 11: the switch-with-returns callee evaluated for every mode from one loop.
#include <cmath>
static double by_mode(double x, double y, int mode) {
  double a = x * y;
  switch (mode) {
    case 0:
      return a + x;
    case 1:
      a *= x;
      // fall through
    case 2:
      return a * y;
    case 3: {
      double t = std::sin(a);
      return t * t;
    }
    default:
      break;
  }
  return a - y;
}

double abp11_switch_modes(const double* x, const double* y, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += by_mode(x[i], y[i], i % 5) * (i + 1);
  return s;
}
