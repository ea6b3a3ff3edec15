// Causal multi-head self-attention core: scores, causal mask, softmax, weighted sum of the values.
// One kernel, differentiated as a whole by torchclad's engine; our own code, llm.c style.
//
// B = batch, T = time, C = channels, NH = heads, hs = C / NH = head size.
// In code the time size is `Tn`: `T` is the scalar type of the template.
//
// void attention_forward(T* out, T* TORCHCLAD_WRITE_ONCE preatt, T* TORCHCLAD_WRITE_ONCE att,
//                        const T* inp, int B, int Tn, int C, int NH)
//   inp    (B, T, 3C)     q, k, v packed the way c_attn produces them: channels [0, C) are the
//                         queries, [C, 2C) the keys, [2C, 3C) the values; head h owns channels
//                         [h*hs, (h+1)*hs) of each of the three.
//   out    (B, T, C)      the heads side by side (the input of c_proj).
//   preatt (B, NH, T, T)  scores q_t . k_s / sqrt(hs) for s <= t; 0 above the diagonal.
//   att    (B, NH, T, T)  softmax over s <= t of the scores; 0 above the diagonal (causal mask).
//   out[b, t, h*hs + i] = sum_{s <= t} att[b, h, t, s] * v[b, s, h*hs + i]
//   Differentiated w.r.t. inp (out, preatt and att are outputs too, so they can be seeded).
//   Requires NH > 0 and C % NH == 0 (checked by the caller, as is B * NH * T * T < 2^31).
//
// preatt and att are marked TORCHCLAD_WRITE_ONCE (each element written once per call, read only
// after): the engine cannot prove by itself that rows written for different (b, h, t) never
// overlap, and would otherwise tape every element it writes (docs/ENGINE_REQUESTS.md nn-4).
// With the mark the tape holds three values per row: its argmax, max and sum.
#include <cmath>

template <typename T>
void attention_forward(T* out, T* TORCHCLAD_WRITE_ONCE preatt, T* TORCHCLAD_WRITE_ONCE att,
                       const T* inp, int B, int Tn, int C, int NH) {
    int hs = C / NH;
    int C3 = 3 * C;
    T scale = T(1) / std::sqrt(T(hs));
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < Tn; t++) {
                const T* q = inp + (b * Tn + t) * C3 + h * hs;
                T* pre = preatt + ((b * NH + h) * Tn + t) * Tn;
                T* a = att + ((b * NH + h) * Tn + t) * Tn;
                // scores of the visible positions, and where the largest is (an int: no
                // derivative of its own)
                int smax = 0;
                for (int s = 0; s <= t; s++) {
                    const T* k = inp + (b * Tn + s) * C3 + C + h * hs;
                    T dot = 0;
                    for (int i = 0; i < hs; i++) dot += q[i] * k[i];
                    pre[s] = dot * scale;
                    if (pre[s] > pre[smax]) smax = s;
                }
                for (int s = t + 1; s < Tn; s++) pre[s] = T(0);
                // softmax, shifted by the row maximum so that exp never overflows; each
                // probability written once (no in-place normalisation)
                T mx = pre[smax];
                T sum = 0;
                for (int s = 0; s <= t; s++) sum += std::exp(pre[s] - mx);
                T inv = T(1) / sum;
                for (int s = 0; s <= t; s++) a[s] = std::exp(pre[s] - mx) * inv;
                for (int s = t + 1; s < Tn; s++) a[s] = T(0);
                // weighted sum of the values, position-major so the inner loop is contiguous
                T* o = out + (b * Tn + t) * C + h * hs;
                for (int i = 0; i < hs; i++) o[i] = T(0);
                for (int s = 0; s <= t; s++) {
                    const T* v = inp + (b * Tn + s) * C3 + 2 * C + h * hs;
                    for (int i = 0; i < hs; i++) o[i] += a[s] * v[i];
                }
            }
        }
    }
}
