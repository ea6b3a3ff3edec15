// An embedding lookup: rows gathered by index. The reverse scatters into the rows of d table
// at indices read from memory, which the engine cannot tell apart: the forward stays parallel,
// the reverse runs serially, and the engine says so (a warning naming this loop).
void omp_scatter(double* out, const long* idx, const double* table, int N, int C) {
  #pragma omp parallel for
  for (int n = 0; n < N; n++) {
    for (int i = 0; i < C; i++) out[n * C + i] = table[idx[n] * C + i] * table[idx[n] * C + i];
  }
}
