// AD-BUG-PATTERNS 9: a double loop variable.  t_j = lo + j·h for t_j < hi:
// f = Σ_j h·sin(k t_j) — differentiable in lo, h and k; hi only decides the (fixed) trip count.
#include <cmath>
double abp09_double_loop_var(double lo, double hi, double h, double k) {
  double s = 0.0;
  for (double t = lo; t < hi; t += h) s += std::sin(k * t) * h;
  return s;
}
