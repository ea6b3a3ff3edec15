// AD-BUG-PATTERNS 3: early return before a loop.
// n == 3: f = c0·c1 + c2  →  (c1, c0, 1).   Otherwise f = Σ c_i²  →  2c.
double abp03_early_return(const double* c, int n) {
  if (n == 3) return c[0] * c[1] + c[2];
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += c[i] * c[i];
  return s;
}
