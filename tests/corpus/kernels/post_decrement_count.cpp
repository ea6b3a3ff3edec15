// An int parameter counted down inside the loop condition, while (n-- > 0), indexing with it.
double post_decrement_count(const double* x, int n, double a) {
  double s = 0.0;
  while (n-- > 0) s = s * a + x[n] * x[n];
  return s;
}
