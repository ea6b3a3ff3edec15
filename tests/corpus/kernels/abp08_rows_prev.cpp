// AD-BUG-PATTERNS 8: rows addressed as inp + b*T*C + t*C, reading the previous time step's row too.
// out[b,t,i] = x[b,t,i]·(1 + x[b,t−1,i]) for t > 0, x[b,0,i] for t = 0.   B, T, C as in llm.c.
void abp08_rows_prev(double* out, const double* inp, int B, int T, int C) {
  for (int b = 0; b < B; b++) {
    for (int t = 0; t < T; t++) {
      const double* x = inp + b * T * C + t * C;
      double* o = out + b * T * C + t * C;
      if (t == 0) {
        for (int i = 0; i < C; i++) o[i] = x[i];
        continue;
      }
      const double* prev = inp + b * T * C + (t - 1) * C;
      for (int i = 0; i < C; i++) o[i] = x[i] * (1.0 + prev[i]);
    }
  }
}
