// AD-BUG-PATTERNS 3: break on the first negative element.
// f = Σ_{i < first negative} x_i³  →  3x_i² before it, 0 from it on.
double abp03_break_negative(const double* x, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) {
    if (x[i] < 0.0) break;
    s += x[i] * x[i] * x[i];
  }
  return s;
}
