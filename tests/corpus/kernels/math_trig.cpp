// sin, cos, tan, atan, atan2 (first, second and third quadrant).
#include <cmath>
double math_trig(double x, double y) {
  double s = std::sin(x) * std::cos(y) + std::tan(0.5 * x);
  s += std::atan(x * y);
  s += std::atan2(y, x);
  s += 2.0 * std::atan2(x, -y);
  s += 3.0 * std::atan2(-y, -x);
  return s;
}
