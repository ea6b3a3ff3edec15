// continue on negative entries, break once the running sum passes cap.
double break_continue(const double* x, int n, double cap) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) {
    if (x[i] < 0.0) continue;
    s += x[i] * x[i];
    if (s > cap) break;
    s *= 1.1;
  }
  return s;
}
