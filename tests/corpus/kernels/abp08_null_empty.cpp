// AD-BUG-PATTERNS 8: n ≤ 0 with null pointers — nothing is read, nothing crashes.
// f = c² (the loop is empty)  →  ∂f/∂c = 2c.
double abp08_null_empty(const double* x, const double* w, double c, int n) {
  double s = c;
  for (int i = 0; i < n; ++i) s += w[i] * x[i];
  return s * c;
}
