// Two outputs: each row scaled to unit RMS times a weight (out), and the row's sum of
// squares (ss).   B = rows, C = columns
#include <cmath>

template <typename T>
void rownorm(T* out, T* ss, const T* x, const T* w, int B, int C) {
  for (int b = 0; b < B; b++) {
    T s = 0;
    for (int c = 0; c < C; c++) s += x[b * C + c] * x[b * C + c];
    ss[b] = s;
    T r = 1 / std::sqrt(s / C + (T)1e-5);
    for (int c = 0; c < C; c++) out[b * C + c] = x[b * C + c] * r * w[c];
  }
}
