// Hand-written causal self-attention backward, float32, llm.c style. A benchmark ORACLE only:
// compared with the engine-generated reverse sweep of attention_forward
// (csrc/kernels/attention.cpp) by bench_reverse.py; never part of the torchclad package.
//
// B = batch, T = time, C = channels, NH = heads, hs = C / NH.
// inp (B, T, 3C) = q | k | v, att (B, NH, T, T) = the forward's softmax output (read back), dout
// (B, T, C) -> dinp (B, T, 3C). Per (b, h, t), with a = att row, o = dout of the row's head:
//   datt_s = o . v_s              dv_s += a_s o                     (s <= t)
//   dpre_s = a_s (datt_s - sum_r a_r datt_r)                        softmax backward, no exp
//   dq    += scale * sum_s dpre_s k_s      dk_s += scale * dpre_s q
// Dot products go into local accumulators (not into memory that may alias the other adjoint
// array); `row` is scratch of T floats. Adjoints accumulate (+=).
#include <cmath>

void attention_backward(float* dinp, const float* dout, const float* inp, const float* att,
                        float* row, int B, int T, int C, int NH) {
    const int hs = C / NH;
    const int C3 = 3 * C;
    const float scale = 1.0f / std::sqrt(float(hs));
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const float* a = att + ((b * NH + h) * T + t) * T;
                const float* q = inp + (b * T + t) * C3 + h * hs;
                float* dq = dinp + (b * T + t) * C3 + h * hs;
                const float* o = dout + (b * T + t) * C + h * hs;

                // through out_i = sum_s a_s v_s,i
                for (int s = 0; s <= t; s++) {
                    const float* v = inp + (b * T + s) * C3 + 2 * C + h * hs;
                    float* dv = dinp + (b * T + s) * C3 + 2 * C + h * hs;
                    const float as = a[s];
                    float acc = 0.0f;
                    for (int i = 0; i < hs; i++) {
                        acc += o[i] * v[i];
                        dv[i] += as * o[i];
                    }
                    row[s] = acc;
                }
                // through the softmax: row[s] becomes d preatt_s, times the score scale
                float ad = 0.0f;
                for (int s = 0; s <= t; s++) ad += a[s] * row[s];
                for (int s = 0; s <= t; s++) row[s] = a[s] * (row[s] - ad) * scale;
                // through preatt_s = scale * q . k_s
                for (int s = 0; s <= t; s++) {
                    const float* k = inp + (b * T + s) * C3 + C + h * hs;
                    float* dk = dinp + (b * T + s) * C3 + C + h * hs;
                    const float d = row[s];
                    for (int i = 0; i < hs; i++) {
                        dq[i] += d * k[i];
                        dk[i] += d * q[i];
                    }
                }
            }
        }
    }
}
