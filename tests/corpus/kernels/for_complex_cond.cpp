// for loop whose trip count depends on the data through a compound condition; the final
// counter (an int) is used afterwards. Inputs make the loop stop at i = 3.
double for_complex_cond(const double* x, int n, double lo) {
  double s = 0.0;
  int i;
  for (i = 0; i < n && (x[i] > lo || i % 2 == 0); ++i) s += x[i] * x[i] * lo;
  return s + i * x[0];
}
