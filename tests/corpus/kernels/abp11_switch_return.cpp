// AD-BUG-PATTERNS 11: switch with returns in cases (case 1 falls through into case 2's return).
// a = xy;  mode 0: a + x;  1: a·x·y;  2: a·y;  3: sin²(a);  other: a − y.
#include <cmath>
double abp11_switch_return(double x, double y, int mode) {
  double a = x * y;
  switch (mode) {
    case 0:
      return a + x;
    case 1:
      a *= x;
      // fall through
    case 2:
      return a * y;
    case 3: {
      double t = std::sin(a);
      return t * t;
    }
    default:
      break;
  }
  return a - y;
}
