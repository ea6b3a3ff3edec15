// Layer normalisation over the last dimension, llm.c style.
// N = rows, C = channels.
#include <cmath>

template <typename T>
void layernorm(T* out, const T* inp, const T* weight, const T* bias, int N, int C) {
  const T eps = 1e-5;
  for (int i = 0; i < N; i++) {
    const T* x = inp + i * C;
    T m = 0;
    for (int c = 0; c < C; c++) m += x[c];
    m = m / C;
    T v = 0;
    for (int c = 0; c < C; c++) {
      T d = x[c] - m;
      v += d * d;
    }
    v = v / C;
    T s = 1 / std::sqrt(v + eps);
    T* o = out + i * C;
    for (int c = 0; c < C; c++) o[c] = (x[c] - m) * s * weight[c] + bias[c];
  }
}
