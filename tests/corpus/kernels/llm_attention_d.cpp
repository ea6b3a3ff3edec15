// Causal multi-head self-attention forward.  B = batch, T = time, C = channels, NH = heads.
// inp: (B,T,3C) holding q, k, v side by side;  preatt, att: (B,NH,T,T);  out: (B,T,C).
#include <cmath>
void attention_forward_d(double* out, double* preatt, double* att, const double* inp,
                         int B, int T, int C, int NH) {
  const int C3 = 3 * C;
  const int hs = C / NH;
  const double scale = 1.0 / std::sqrt((double)hs);
  for (int b = 0; b < B; b++) {
    for (int t = 0; t < T; t++) {
      for (int h = 0; h < NH; h++) {
        const double* q = inp + b * T * C3 + t * C3 + h * hs;
        double* pre = preatt + b * NH * T * T + h * T * T + t * T;
        double* w = att + b * NH * T * T + h * T * T + t * T;
        double mx = -1e4;
        for (int s = 0; s <= t; s++) {
          const double* k = inp + b * T * C3 + s * C3 + h * hs + C;
          double dot = 0.0;
          for (int i = 0; i < hs; i++) dot += q[i] * k[i];
          dot *= scale;
          if (dot > mx) mx = dot;
          pre[s] = dot;
        }
        double sum = 0.0;
        for (int s = 0; s <= t; s++) {
          double e = std::exp(pre[s] - mx);
          sum += e;
          w[s] = e;
        }
        double inv = sum == 0.0 ? 0.0 : 1.0 / sum;
        for (int s = 0; s < T; s++) w[s] = s <= t ? w[s] * inv : 0.0;
        double* o = out + b * T * C + t * C + h * hs;
        for (int i = 0; i < hs; i++) o[i] = 0.0;
        for (int s = 0; s <= t; s++) {
          const double* v = inp + b * T * C3 + s * C3 + h * hs + 2 * C;
          const double a = w[s];
          for (int i = 0; i < hs; i++) o[i] += a * v[i];
        }
      }
    }
  }
}
