// Each row's inner loop runs a different number of times (C - b % 3) and records a value per
// step, so the iterations record different amounts: each records on its thread's tape, and
// the offset table of torchclad::IterRecords finds its record again in the reverse.
void omp_records(double* out, const double* inp, int B, int C) {
  #pragma omp parallel for
  for (int b = 0; b < B; b++) {
    double p = 1;
    for (int i = 0; i < C - b % 3; i++) p = p * (1.0 + inp[b * C + i] * inp[b * C + i]);
    out[b] = p;
  }
}
