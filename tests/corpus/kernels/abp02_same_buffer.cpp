// AD-BUG-PATTERNS 2: the same buffer is passed for a and b; the two gradients add up.
// f = Σ a_i b_i²:  ∂f/∂a_i = b_i²,  ∂f/∂b_i = 2 a_i b_i;  with a = b = x the sum is 3 x_i².
double abp02_same_buffer(const double* a, const double* b, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += a[i] * b[i] * b[i];
  return s;
}
