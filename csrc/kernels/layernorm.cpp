// Layer normalisation over the last dimension, llm.c style (our own code).
//
// B = batch, T = time, C = channels. The kernel sees the rows flattened: N = B * T rows of C
// values (any leading shape flattens to N; a multi-dimensional normalized_shape flattens to C).
//
// void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight,
//                        const T* bias, int N, int C, T eps)
//   inp (N, C), weight (C) or nullptr, bias (C) or nullptr  ->  out (N, C), mean (N), rstd (N)
//   mean = sum(x) / C,  var = sum((x - mean)^2) / C (biased, like torch),
//   rstd = 1 / sqrt(var + eps),  out = (x - mean) * rstd * weight + bias
//   weight == nullptr means no scale (elementwise_affine=False), bias == nullptr no shift.
//   mean and rstd are outputs, as in llm.c: the statistics of each row, handy to callers.
//   Differentiated w.r.t. inp, weight, bias.
//
// Written for the engine and the vectoriser (the generated reverse sweep is what runs in
// backward, so its loops must vectorise too):
// - Every sum over a row runs in 64 independent lanes (lane j sees elements j, 64 + j, ...),
//   folded to 8 by a fixed tree, then added in order (a vectorisable loop, short dependency
//   chains, and one fixed summation order: the same result for every vector width). The last
//   C % 64 values go through a plain loop.
// - The variance is sum((x - c)^2) / C with c = torchclad::detach(mean): the same value, and the
//   same gradient (2 (x - mean) / C: the mean's own path, -2 sum_i (x_i - mean) / C, is zero),
//   without the reverse sweep computing that zero as a serial reduction over the row.
// - The normalisation reads the scalar mean and rstd: the engine sums their adjoints (sum_i g_i
//   w_i and sum_i g_i w_i xhat_i, the two reductions of the layernorm backward) in 16 lanes of
//   its own, forwards; the tape holds the row's two sums only.
// - The rows are independent: `omp parallel for`. In the generated reverse a row writes only its
//   own row of d inp, and adds into all of d weight and d bias, which the engine sums in partial
//   sums per fixed chunk of rows, added in chunk order (the same bits for any number of threads;
//   a null weight or bias is never touched).
#include <torchclad/runtime.h>  // torchclad::detach
#include <cmath>

template <typename T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias,
                       int N, int C, T eps) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const T* x = inp + n * C;
        int nb = C / 64;  // full blocks of 64 values; then C % 64 more
        T a[64];
        for (int j = 0; j < 64; j++) a[j] = T(0);
        for (int k = 0; k < nb; k++) {
            for (int j = 0; j < 64; j++) a[j] += x[k * 64 + j];
        }
        T ra[8];  // the 64 lanes in 8, each a fixed tree (vectorises; short dependency chains)
        for (int j = 0; j < 8; j++) {
            ra[j] = ((a[j] + a[j + 8]) + (a[j + 16] + a[j + 24]))
                  + ((a[j + 32] + a[j + 40]) + (a[j + 48] + a[j + 56]));
        }
        T sum = 0;
        for (int i = nb * 64; i < C; i++) sum += x[i];
        for (int j = 0; j < 8; j++) sum += ra[j];
        T m = sum / C;
        T c = torchclad::detach(m);  // the mean, without a derivative (see above)
        T q[64];
        for (int j = 0; j < 64; j++) q[j] = T(0);
        for (int k = 0; k < nb; k++) {
            for (int j = 0; j < 64; j++) {
                T d = x[k * 64 + j] - c;
                q[j] += d * d;
            }
        }
        T sq = 0;
        for (int i = nb * 64; i < C; i++) {
            T d = x[i] - c;
            sq += d * d;
        }
        T rq[8];
        for (int j = 0; j < 8; j++) {
            rq[j] = ((q[j] + q[j + 8]) + (q[j + 16] + q[j + 24]))
                  + ((q[j + 32] + q[j + 40]) + (q[j + 48] + q[j + 56]));
        }
        for (int j = 0; j < 8; j++) sq += rq[j];
        T s = T(1) / std::sqrt(sq / C + eps);
        T* o = out + n * C;
        for (int i = 0; i < C; i++) {
            T w = weight != nullptr ? weight[i] : T(1);
            T sh = bias != nullptr ? bias[i] : T(0);
            o[i] = (x[i] - m) * s * w + sh;
        }
        mean[n] = m;
        rstd[n] = s;
    }
}
