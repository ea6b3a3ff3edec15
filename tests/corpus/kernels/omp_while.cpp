// A data-dependent trip count inside a parallel loop: the while loop's counter is recorded per
// iteration (IterRecords), and its index cannot be bounded, so the reverse runs serially
// (with a warning) while the forward stays parallel.
void omp_while(double* out, const double* inp, int B, int C) {
  #pragma omp parallel for
  for (int b = 0; b < B; b++) {
    double p = 1;
    int i = 0;
    while (i < C && p < 3.0) {
      p = p * (1.0 + inp[b * C + i] * inp[b * C + i]);
      i++;
    }
    out[b] = p;
  }
}
