// switch on an int array: break, fall-through from 2 into 3 into 4, default.
#include <cmath>
double switch_basic(const double* x, const int* op, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) {
    switch (op[i]) {
      case 0:
        s += x[i];
        break;
      case 1:
        s += x[i] * x[i];
        break;
      case 2:
      case 3:
        s *= x[i];
        // fall through
      case 4:
        s -= 0.5 * x[i];
        break;
      default:
        s += std::cos(x[i]);
    }
  }
  return s;
}
