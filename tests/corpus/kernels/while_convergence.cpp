// Fixed-point iteration x ← cos(a·x) + b until successive iterates differ by less than tol; the
// trip count is data dependent, the result is the last iterate (differentiated as computed).
#include <cmath>
double while_convergence(double a, double b) {
  double x = 0.5;
  double prev = 10.0;
  int it = 0;
  while (std::fabs(x - prev) > 1e-6 && it < 200) {
    prev = x;
    x = std::cos(a * x) + b;
    ++it;
  }
  return x;
}
