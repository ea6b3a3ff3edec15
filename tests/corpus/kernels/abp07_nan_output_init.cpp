// AD-BUG-PATTERNS 7: an output buffer arrives full of NaN (stale memory). It is fully overwritten,
// so the result of this fresh computation cannot depend on it:
// y_i = x_i³ + x_i  →  ∂/∂x_i = g_i (3x_i² + 1),  ∂/∂y_old = 0 exactly (not NaN).
void abp07_nan_output_init(const double* x, double* y, int n) {
  for (int i = 0; i < n; ++i) y[i] = x[i] * x[i] + 1.0;
  for (int i = 0; i < n; ++i) y[i] = y[i] * x[i];
}
