// AD-BUG-PATTERNS 1: a value overwritten every iteration.
// s = Σ_{i<n} 1/(i + 1 + a²)   →   ds/da = Σ_{i<n} −2a / (i + 1 + a²)².
double abp01_overwrite_accum(double a, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += 1.0 / (i + 1.0 + a * a);
  return s;
}
