// A pre-norm transformer block from helper layers, llm.c style.  B = batch, T = time, C = channels,
// NH = heads.  Scratch buffers ln (B,T,C), qkv (B,T,3C), att (B,NH,T,T), y (B,T,C) are outputs too.
//   ln = layernorm(x);  qkv = ln·Wqkv;  y = causal_attention(qkv);  out = x + y·Wo
#include <cmath>
static void ln_rows(double* out, const double* inp, const double* g, const double* b, int N, int C) {
  for (int n = 0; n < N; n++) {
    const double* x = inp + n * C;
    double mu = 0.0;
    for (int i = 0; i < C; i++) mu += x[i];
    mu /= C;
    double var = 0.0;
    for (int i = 0; i < C; i++) var += (x[i] - mu) * (x[i] - mu);
    double rs = 1.0 / std::sqrt(var / C + 1e-5);
    for (int i = 0; i < C; i++) out[n * C + i] = (x[i] - mu) * rs * g[i] + b[i];
  }
}

static void mat_rows(double* out, const double* inp, const double* w, int N, int IN, int OUT) {
  for (int n = 0; n < N; n++)
    for (int o = 0; o < OUT; o++) {
      double acc = 0.0;
      for (int i = 0; i < IN; i++) acc += inp[n * IN + i] * w[o * IN + i];
      out[n * OUT + o] = acc;
    }
}

static void causal_attention(double* y, double* att, const double* qkv, int B, int T, int C, int NH) {
  int hs = C / NH;
  double scale = 1.0 / std::sqrt((double)hs);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (int t = 0; t < T; t++) {
        const double* q = qkv + (b * T + t) * 3 * C + h * hs;
        double* a = att + ((b * NH + h) * T + t) * T;
        double mx = -1e9;
        for (int s = 0; s < T; s++) {
          if (s > t) {
            a[s] = 0.0;
            continue;
          }
          const double* k = qkv + (b * T + s) * 3 * C + C + h * hs;
          double d = 0.0;
          for (int i = 0; i < hs; i++) d += q[i] * k[i];
          a[s] = d * scale;
          if (a[s] > mx) mx = a[s];
        }
        double z = 0.0;
        for (int s = 0; s <= t; s++) {
          a[s] = std::exp(a[s] - mx);
          z += a[s];
        }
        for (int s = 0; s <= t; s++) a[s] /= z;
        for (int i = 0; i < hs; i++) {
          double acc = 0.0;
          for (int s = 0; s <= t; s++) acc += a[s] * qkv[(b * T + s) * 3 * C + 2 * C + h * hs + i];
          y[(b * T + t) * C + h * hs + i] = acc;
        }
      }
}

void block_forward_d(double* out, double* ln, double* qkv, double* att, double* y, const double* x,
                     const double* g, const double* bta, const double* wqkv, const double* wo,
                     int B, int T, int C, int NH) {
  ln_rows(ln, x, g, bta, B * T, C);
  mat_rows(qkv, ln, wqkv, B * T, C, 3 * C);
  causal_attention(y, att, qkv, B, T, C, NH);
  mat_rows(out, y, wo, B * T, C, C);
  for (int i = 0; i < B * T * C; i++) out[i] += x[i];
}
