// AD-BUG-PATTERNS 10: two loops, both with a counter named i, the second running backwards.
// s = Σ x;  p ← 0.5 p + x_i s for i = n−1 … 0.
double abp10_two_loops_i(const double* x, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += x[i];
  double p = 1.0;
  for (int i = n - 1; i >= 0; --i) p = p * 0.5 + x[i] * s;
  return p;
}
