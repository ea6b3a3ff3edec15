// A local array read non-linearly, overwritten in place, and read again.
#include <cmath>
double local_array_reread(const double* x) {
  double t[4];
  for (int i = 0; i < 4; ++i) t[i] = x[i] * x[i];
  double a = t[0] * t[1] + t[2] * t[3];
  for (int i = 0; i < 4; ++i) t[i] = std::exp(0.5 * x[i]) * t[(i + 1) % 4];
  a += t[0] * t[3] - t[1] * t[2];
  t[2] = a * t[1];
  return a * t[2];
}
