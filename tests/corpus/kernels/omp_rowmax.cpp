// Rows of V values Vp apart (llm.c's padded vocabulary), two rows an iteration of the parallel
// loop (the step a named constant, as llm.c's LOOP_UNROLL): a row's running max, whose
// derivative goes to the element it took, times the row's sum of squares. The rows' elements
// are disjoint when V <= Vp, which the engine tests before the reverse loop.
void omp_rowmax(double* out, const double* x, int N, int V, int Vp) {
  const int PAIR = 2;
  #pragma omp parallel for
  for (int r = 0; r < N; r += PAIR) {
    for (int n = r; n < r + PAIR && n < N; n++) {
      const double* row = x + n * Vp;
      double m = -1e300;
      for (int i = 0; i < V; i++)
        if (row[i] > m) m = row[i];
      double s = 0;
      for (int i = 0; i < V; i++) s += row[i] * row[i];
      out[n] = m * s;
    }
  }
}
