// Layer normalisation over channels, keeping the row mean and 1/std as outputs for a backward pass.
// B = batch, T = time, C = channels.  out: (B,T,C)  mean, rstd: (B,T)  inp: (B,T,C)  gamma, beta: (C)
#include <cmath>
void layernorm_forward_d(double* out, double* mean, double* rstd, const double* inp,
                         const double* gamma, const double* beta, int B, int T, int C) {
  const double eps = 1e-5;
  for (int b = 0; b < B; b++) {
    for (int t = 0; t < T; t++) {
      const double* x = inp + b * T * C + t * C;
      double mu = 0.0;
      for (int i = 0; i < C; i++) mu += x[i];
      mu /= C;
      double var = 0.0;
      for (int i = 0; i < C; i++) {
        double dev = x[i] - mu;
        var += dev * dev;
      }
      var /= C;
      double rs = 1.0 / std::sqrt(var + eps);
      double* o = out + b * T * C + t * C;
      for (int i = 0; i < C; i++) o[i] = (x[i] - mu) * rs * gamma[i] + beta[i];
      mean[b * T + t] = mu;
      rstd[b * T + t] = rs;
    }
  }
}
