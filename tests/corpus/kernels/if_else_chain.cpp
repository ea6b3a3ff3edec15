// if / else if / else chain inside a loop, then a conditional on the accumulated value.
#include <cmath>
double if_else_chain(const double* x, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) {
    double v = x[i];
    if (v < -0.5) {
      s += v * v;
    } else if (v < 0.0) {
      s -= std::sin(v);
    } else if (v < 0.5)
      s += 3.0 * v;
    else {
      s *= 1.0 + 0.1 * v;
      s += std::exp(v);
    }
  }
  if (s > 2.0) s = std::sqrt(s);
  return s;
}
