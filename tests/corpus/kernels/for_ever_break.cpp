// Loops without a condition, left only by break: for (;;) and while (true).
#include <cmath>
double for_ever_break(const double* x, int n, double a) {
  double s = 0.0;
  int i = 0;
  for (;;) {
    s += std::exp(-a * x[i]) * x[i];
    if (++i >= n) break;
  }
  double p = 1.0;
  int k = 0;
  while (true) {
    p *= 1.0 + a * x[k];
    k += 2;
    if (k >= n || p > 5.0) break;
  }
  return s * p;
}
