// An output array written, read non-linearly, then overwritten; a second output keeps the sum.
// y_i = sin(x_i)·s,  z_0 = s,  s = Σ x_j⁴.
#include <cmath>
void output_overwritten_twice(const double* x, double* y, double* z, int n) {
  for (int i = 0; i < n; ++i) y[i] = x[i] * x[i];
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += y[i] * y[i];
  for (int i = 0; i < n; ++i) y[i] = std::sin(x[i]) * s;
  z[0] = s;
}
