// 200000 overwrites of one scalar: the recorded values span many tape slabs.
#include <cmath>
double long_loop_tape(const double* x, int n, double a) {
  double s = 0.1;
  for (int k = 0; k < 200000; ++k) {
    s = std::sin(s) * a + x[k % n] * 1e-3;
  }
  return s;
}
