// std::exp, std::log, std::log1p, std::sqrt.
#include <cmath>
double math_exp_log(double x, double y) {
  double a = std::exp(x * 0.5) + std::log(y);
  double b = std::log1p(x * y) * std::sqrt(y + x);
  return a * b + std::exp(-y) / std::sqrt(x);
}
