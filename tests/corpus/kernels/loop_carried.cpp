// Two loop-carried values feeding each other.
double loop_carried(const double* x, int n) {
  double p = 1.0;
  double s = 0.0;
  for (int i = 0; i < n; ++i) {
    p = p * x[i] + s;
    s = s + p * 0.5;
  }
  return p + s;
}
