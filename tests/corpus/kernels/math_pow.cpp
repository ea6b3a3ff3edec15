// pow with a differentiable base, exponent, both, and an integer exponent.
#include <cmath>
double math_pow(double x, double y) {
  double s = std::pow(x, y);
  s += std::pow(x, 3.0);
  s += std::pow(2.0, y);
  s += std::pow(x * y, 0.5);
  s += std::pow(y, 2);
  s += std::pow(y + 1.0, -x);
  return s;
}
