// AD-BUG-PATTERNS 5: relu at 0 has derivative 0; leaky relu at 0 takes the negative slope
// (PyTorch: x > 0 ? g : g·slope).
// y_i = relu(x_i),  z_i = leaky(x_i, 0.1)   →  ∂/∂x_i = gy_i·[x_i > 0] + gz_i·(x_i > 0 ? 1 : 0.1).
void abp05_relu_zero(const double* x, double* y, double* z, int n) {
  for (int i = 0; i < n; ++i) {
    y[i] = x[i] > 0.0 ? x[i] : 0.0;
    z[i] = x[i] > 0.0 ? x[i] : 0.1 * x[i];
  }
}
