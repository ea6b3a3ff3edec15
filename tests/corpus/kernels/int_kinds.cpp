// int, long, size_t, bool and unsigned parameters steer the computation; only x is differentiable.
// f = ±(n·x·k(k+1)/2 + m·x²) + u·x
#include <cstddef>
double int_kinds(double x, int n, long m, std::size_t k, bool flip, unsigned u) {
  double s = 0.0;
  for (std::size_t i = 0; i < k; ++i) s += x * (double)(i + 1);
  s *= (double)n;
  s += (double)m * x * x;
  if (flip) s = -s;
  s += u * x;
  return s;
}
