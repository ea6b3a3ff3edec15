// AD-BUG-PATTERNS 7: a local array declared inside a loop; its adjoint must restart every iteration.
// even i: x³ + x;  odd i: x   →   ∂/∂x_i = 3x_i² + 1 (even), 1 (odd).
double abp07_loop_local_array(const double* x, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) {
    double tmp[3] = {x[i], 0.0, 1.0};
    if (i % 2 == 0) tmp[1] = x[i] * x[i];
    tmp[2] *= tmp[0];
    s += tmp[0] * tmp[1] + tmp[2];
  }
  return s;
}
