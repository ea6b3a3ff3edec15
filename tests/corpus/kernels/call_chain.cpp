// A chain of calls f → g → h with a helper used twice and a call inside a loop.
#include <cmath>
static double h(double v) { return std::exp(-v * v); }
static double g(double a, double b) { return h(a) * b + h(b); }

double call_chain(const double* x, int n, double w) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += g(x[i], w) * x[i];
  return g(s, w);
}
