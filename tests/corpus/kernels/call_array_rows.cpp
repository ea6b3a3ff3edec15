// A callee over arrays called per row with a pointer into the middle of a matrix.
// y_r = tanh(A_r · x)
#include <cmath>
static double dot(const double* a, const double* b, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

void call_array_rows(const double* A, const double* x, double* y, int rows, int cols) {
  for (int r = 0; r < rows; ++r) y[r] = std::tanh(dot(A + r * cols, x, cols));
}
