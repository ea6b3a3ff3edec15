// Inside a loop, break leaves only the switch while continue skips the rest of the loop body.
#include <cmath>
double switch_in_loop_continue(const double* x, const int* kind, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) {
    double t = x[i];
    switch (kind[i]) {
      case 0:
        t = t * t;
        break;
      case 1:
        s += std::sin(t);
        continue;
      case 2:
        t = std::exp(0.5 * t);
        break;
      default:
        continue;
    }
    s = s * 0.9 + t;
  }
  return s;
}
