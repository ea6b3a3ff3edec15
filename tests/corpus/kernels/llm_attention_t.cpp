// Causal multi-head self-attention forward as a template; scores live in preatt/att rows.
// B = batch, L = time, C = channels, NH = heads.  inp: (B,L,3C)  preatt, att: (B,NH,L,L)  out: (B,L,C)
#include <cmath>
template <typename T>
void attention_forward_t(T* out, T* preatt, T* att, const T* inp, int B, int L, int C, int NH) {
  int hs = C / NH;
  T scale = T(1) / std::sqrt(T(hs));
  for (int b = 0; b < B; b++) {
    const T* base = inp + b * L * 3 * C;
    for (int h = 0; h < NH; h++) {
      for (int t = 0; t < L; t++) {
        T* pre = preatt + ((b * NH + h) * L + t) * L;
        T* w = att + ((b * NH + h) * L + t) * L;
        T mx = T(-1e4);
        for (int s = 0; s <= t; s++) {
          T dot = 0;
          for (int i = 0; i < hs; i++) dot += base[t * 3 * C + h * hs + i] * base[s * 3 * C + C + h * hs + i];
          pre[s] = dot * scale;
          mx = pre[s] > mx ? pre[s] : mx;
        }
        T sum = 0;
        for (int s = 0; s <= t; s++) {
          w[s] = std::exp(pre[s] - mx);
          sum += w[s];
        }
        for (int s = 0; s <= t; s++) w[s] /= sum;
        for (int s = t + 1; s < L; s++) w[s] = 0;
        T* o = out + (b * L + t) * C + h * hs;
        for (int i = 0; i < hs; i++) {
          T acc = 0;
          for (int s = 0; s <= t; s++) acc += w[s] * base[s * 3 * C + 2 * C + h * hs + i];
          o[i] = acc;
        }
      }
    }
  }
}
