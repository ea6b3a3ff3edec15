// Triangular nested loops writing an output: y_i = Σ_{j≤i} x_j x_{i−j} (self-convolution).
void triangular_loops(const double* x, double* y, int n) {
  for (int i = 0; i < n; ++i) {
    y[i] = 0.0;
    for (int j = 0; j <= i; ++j) y[i] += x[j] * x[i - j];
  }
}
