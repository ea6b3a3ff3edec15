// A parallel loop whose body calls a function of the source: the callee's records go on the
// iteration's own tape; the engine does not look into the callee's adjoint writes, so the
// reverse runs serially (with a warning).
static double sq_sum(const double* x, int n) {
  double s = 0;
  for (int i = 0; i < n; i++) s += x[i] * x[i];
  return s;
}
void omp_callee(double* out, const double* inp, int B, int C) {
  #pragma omp parallel for
  for (int b = 0; b < B; b++) out[b] = sq_sum(inp + b * C, C) * inp[b * C];
}
