// llm.c's matmul_forward shape: the parallel row loop moves by a constant step (a block of 4
// rows, LOOP_UNROLL), an inner loop runs over the rows of the block; the weights are read by
// every block (partial sums), each block's rows of inp by that block only.
#define UNROLL 4
void omp_step(double* out, const double* inp, const double* w, int N, int C, int OC) {
  #pragma omp parallel for
  for (int r = 0; r < N; r += UNROLL) {
    for (int o = 0; o < OC; o++) {
      for (int k = 0; k < UNROLL; k++) {
        double s = 0;
        for (int i = 0; i < C; i++) s += inp[(r + k) * C + i] * w[o * C + i];
        out[(r + k) * OC + o] = s * s;
      }
    }
  }
}
