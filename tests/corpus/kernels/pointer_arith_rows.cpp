// Rows addressed by pointer arithmetic, llm.c style.  B = batch, T = time, C = channels.
// out[b,t,i] = inp[b,t,i]·scale[i] / (1 + Σ_j inp[b,t,j]²)
void pointer_arith_rows(double* out, const double* inp, const double* scale, int B, int T, int C) {
  for (int b = 0; b < B; b++) {
    for (int t = 0; t < T; t++) {
      const double* x = inp + b * T * C + t * C;
      double* o = out + b * T * C + t * C;
      double ss = 0.0;
      for (int i = 0; i < C; i++) ss += x[i] * x[i];
      for (int i = 0; i < C; i++) o[i] = x[i] * scale[i] / (1.0 + ss);
    }
  }
}
