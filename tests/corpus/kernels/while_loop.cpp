// while loops: a Horner-like recurrence on even entries, then a backward walk that stops on a
// compound condition involving the running value.
double while_loop(const double* x, int n, double a) {
  int i = 0;
  double s = 1.0;
  while (i < n) {
    s = s * a + x[i];
    i += 2;
  }
  i = n - 1;
  while (i > 0 && s < 100.0) {
    s += x[i] * a;
    i--;
  }
  return s;
}
