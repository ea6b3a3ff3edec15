// AD-BUG-PATTERNS 8: a void kernel with n = 0 and every pointer null.
void abp08_null_void(const double* x, double* y, int n) {
  for (int i = 0; i < n; ++i) y[i] = x[i] * x[i];
}
