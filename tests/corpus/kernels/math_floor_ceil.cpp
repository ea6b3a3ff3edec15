// floor and ceil have zero derivative; x − floor(x) has derivative 1; a floor used as an index.
#include <cmath>
double math_floor_ceil(double x, double y, const double* table) {
  double frac = x - std::floor(x);
  double s = frac * y + std::ceil(y) * x;
  int k = (int)std::floor(y);
  s += table[k] * x;
  return s;
}
