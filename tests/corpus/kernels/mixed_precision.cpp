// A float parameter mixed into double arithmetic; the result is double.
#include <cmath>
double mixed_precision(float x, double y, const float* w, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += (double)w[i] * y + w[i] * x;
  return s * std::exp((double)x * 0.25) + x * y;
}
