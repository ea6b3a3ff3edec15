// Linear layer: out[b,t,o] = bias[o] + Σ_c inp[b,t,c]·weight[o,c]; bias may be null.
// B = batch, T = time, C = in channels, OC = out channels.
void matmul_forward_d(double* out, const double* inp, const double* weight, const double* bias,
                      int B, int T, int C, int OC) {
  for (int b = 0; b < B; b++) {
    for (int t = 0; t < T; t++) {
      const double* x = inp + (b * T + t) * C;
      double* y = out + (b * T + t) * OC;
      for (int o = 0; o < OC; o++) {
        double acc = bias != nullptr ? bias[o] : 0.0;
        const double* wrow = weight + o * C;
        for (int c = 0; c < C; c++) acc += x[c] * wrow[c];
        y[o] = acc;
      }
    }
  }
}
