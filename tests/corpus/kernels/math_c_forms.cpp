// The unqualified C spellings from <math.h>, away from kinks.
#include <math.h>
double math_c_forms(double x, double y) {
  double s = exp(x) + log(y) + log1p(x) + sqrt(y);
  s += pow(x, y) + sin(x) * cos(y) + tan(0.3 * y);
  s += tanh(x) + sinh(y) - cosh(x) + erf(y);
  s += atan(x) + atan2(y, x);
  s += fabs(x - 2.0 * y) + fmax(x, y) + fmin(x, 0.1 * y);
  s += floor(3.0 * x) * y + ceil(y) * x;
  return s;
}
