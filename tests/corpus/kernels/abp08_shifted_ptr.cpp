// AD-BUG-PATTERNS 8: p = x + 1;  s = Σ_{i<n−1} p_i x_i = Σ x_{i+1} x_i
// → ∂s/∂x_j = x_{j+1} + x_{j−1}, with the missing neighbour dropped at both ends.
double abp08_shifted_ptr(const double* x, int n) {
  const double* p = x + 1;
  double s = 0.0;
  for (int i = 0; i < n - 1; ++i) s += p[i] * x[i];
  return s;
}
