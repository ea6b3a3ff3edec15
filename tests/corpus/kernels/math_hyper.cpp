// tanh, sinh, cosh, erf.
#include <cmath>
double math_hyper(double x, double y) {
  double s = std::tanh(x * y) + std::sinh(x) * std::cosh(y);
  s += std::erf(x - y);
  s += std::erf(0.3 * y) * std::tanh(x);
  return s;
}
