// AD-BUG-PATTERNS 6: NaN from values that never reach the output.
// acos(−C/A) and sqrt(A − C) are NaN for A = 1, C = 2 but unused; f = A x² + C x:
// ∂f/∂A = x²,  ∂f/∂C = x,  ∂f/∂x = 2Ax + C — all finite.
#include <cmath>
double abp06_unused_nan(double A, double C, double x) {
  double a = std::acos(-C / A);
  double b = std::sqrt(A - C);
  double unused = a * b * x;
  return A * x * x + C * x;
}
