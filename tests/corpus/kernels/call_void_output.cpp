// A void callee writes an output array which the caller then reads and overwrites.
#include <cmath>
static void softplus_into(const double* x, double* y, int n) {
  for (int i = 0; i < n; ++i) y[i] = std::log1p(std::exp(x[i]));
}

void call_void_output(const double* x, double* y, int n) {
  softplus_into(x, y, n);
  for (int i = 1; i < n; ++i) y[i] = y[i] * y[i - 1];
}
