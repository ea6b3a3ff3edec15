// return from inside a loop once the running product passes thresh; -p otherwise.
double early_return_loop(const double* x, int n, double thresh) {
  double p = 1.0;
  for (int i = 0; i < n; ++i) {
    p *= x[i];
    if (p > thresh) return p * thresh;
  }
  return -p;
}
