// Rows of a parallel loop share a weight vector and an optional bias: a row's reverse adds
// into its own row of d inp (private to the iteration) and into all of d w and d bias (every
// iteration: partial sums per chunk of rows, added in chunk order). bias may be null.
void omp_rows_shared(double* out, const double* inp, const double* w, const double* bias,
                     int B, int C) {
  #pragma omp parallel for
  for (int b = 0; b < B; b++) {
    const double* x = inp + b * C;
    double m = 0;
    for (int i = 0; i < C; i++) m += x[i] * w[i];
    for (int i = 0; i < C; i++) out[b * C + i] = x[i] * m + (bias != nullptr ? bias[i] : 0.0);
  }
}
