// AD-BUG-PATTERNS 11: a scores array declared once and refilled row by row (causal attention of
// one head).  L = sequence length (≤ 8), D = head size.
// out[t] = Σ_{s≤t} softmax_s(q_t·k_s / √D) v_s
#include <cmath>
void abp11_attention_rows(const double* q, const double* k, const double* v, double* out, int L, int D) {
  double scores[8];
  for (int t = 0; t < L; ++t) {
    double mx = -1e30;
    for (int s = 0; s <= t; ++s) {
      double dot = 0.0;
      for (int d = 0; d < D; ++d) dot += q[t * D + d] * k[s * D + d];
      scores[s] = dot / std::sqrt((double)D);
      if (scores[s] > mx) mx = scores[s];
    }
    double z = 0.0;
    for (int s = 0; s <= t; ++s) {
      scores[s] = std::exp(scores[s] - mx);
      z += scores[s];
    }
    for (int d = 0; d < D; ++d) {
      double acc = 0.0;
      for (int s = 0; s <= t; ++s) acc += scores[s] / z * v[s * D + d];
      out[t * D + d] = acc;
    }
  }
}
