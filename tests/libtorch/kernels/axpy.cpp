// An output that is also an input (updated in place on a copy), a float size parameter and a
// kernel for double only (no template): y = y + a * x * x.
void axpy_sq(double* y, const double* x, double a, long n) {
  for (long i = 0; i < n; i++) y[i] += a * x[i] * x[i];
}
