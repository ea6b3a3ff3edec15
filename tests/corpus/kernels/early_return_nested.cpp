// return from the inner of two nested loops.
double early_return_nested(const double* A, int n, double lim) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      s += A[i * n + j] * A[j * n + i];
      if (s > lim) return s * lim;
    }
    s *= 0.9;
  }
  return s;
}
