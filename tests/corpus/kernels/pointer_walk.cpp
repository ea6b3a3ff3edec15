// A pointer walked with ++, *p++, != end, and pointers formed as x + k inside a loop.
// f = Σ x_i² + 2 Σ_{i even} x_i w + 0.5 Σ_{i odd} x_i
double pointer_walk(const double* x, int n, double w) {
  const double* p = x;
  const double* end = x + n;
  double s = 0.0;
  while (p != end) {
    s += *p * *p;
    ++p;
  }
  const double* r = x;
  for (int i = 0; i < n; i += 2) {
    s += 2.0 * *r++ * w;
    r++;
  }
  for (int k = n - 1; k >= 0; k -= 2) {
    const double* q = x + k;
    s += 0.5 * *q;
  }
  return s;
}
