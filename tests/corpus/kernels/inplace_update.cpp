// An in/out buffer updated in place, each new value reading a neighbour that may or may not have
// been overwritten already (x[i+1] is still old, x[0] is already new when i = n−1).
void inplace_update(double* x, const double* w, int n) {
  for (int i = 0; i < n; ++i) {
    double next = x[(i + 1) % n];
    x[i] = x[i] * x[i] * w[i] + 0.5 * next;
  }
  for (int i = n - 1; i > 0; --i) x[i] -= 0.25 * x[i - 1];
}
