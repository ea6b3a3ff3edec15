// Attention-like: the (b, h) pairs are independent (collapse(2)); in a pair, query row t sums
// over positions s <= t of the keys, so the reverse of a pair adds into the rows s of the keys
// of that pair's head only. inp holds (B, T, 2C): queries in channels [0, C), keys in [C, 2C);
// head h owns channels [h*D, (h+1)*D) of each, D = C / H.
#include <cmath>
void omp_collapse(double* out, const double* inp, int B, int T, int C, int H) {
  int D = C / H;
  #pragma omp parallel for collapse(2)
  for (int b = 0; b < B; b++) {
    for (int h = 0; h < H; h++) {
      for (int t = 0; t < T; t++) {
        const double* q = inp + (b * T + t) * 2 * C + h * D;
        double acc = 0;
        for (int s = 0; s <= t; s++) {
          const double* k = inp + (b * T + s) * 2 * C + C + h * D;
          double dot = 0;
          for (int i = 0; i < D; i++) dot += q[i] * k[i];
          acc += std::tanh(dot);
        }
        out[(b * H + h) * T + t] = acc;
      }
    }
  }
}
