// Layer normalisation as a template over the scalar type T.
// B = batch, L = time (llm.c's T, renamed because T is the scalar type), C = channels.
#include <cmath>
template <typename T>
void layernorm_forward_t(T* out, T* mean, T* rstd, const T* inp, const T* gamma, const T* beta,
                         int B, int L, int C) {
  const T eps = T(1e-5);
  for (int b = 0; b < B; b++) {
    for (int l = 0; l < L; l++) {
      const T* x = inp + b * L * C + l * C;
      T sum = 0;
      for (int i = 0; i < C; i++) sum += x[i];
      T mu = sum / C;
      T var = 0;
      for (int i = 0; i < C; i++) var += (x[i] - mu) * (x[i] - mu);
      var = var / C;
      T rs = T(1) / std::sqrt(var + eps);
      T* o = out + b * L * C + l * C;
      for (int i = 0; i < C; i++) {
        T xhat = (x[i] - mu) * rs;
        o[i] = xhat * gamma[i] + beta[i];
      }
      mean[b * L + l] = mu;
      rstd[b * L + l] = rs;
    }
  }
}
