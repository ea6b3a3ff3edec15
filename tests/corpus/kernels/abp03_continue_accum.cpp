// AD-BUG-PATTERNS 3: continue inside an accumulating loop.
// f = Σ_{x_i ≥ 0} (w x_i² + x_i)  →  ∂/∂x_i = 2 w x_i + 1 for x_i ≥ 0, else 0;  ∂/∂w = Σ_{x_i ≥ 0} x_i².
double abp03_continue_accum(const double* x, int n, double w) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) {
    if (x[i] < 0.0) continue;
    s += w * x[i] * x[i];
    s += x[i];
  }
  return s;
}
