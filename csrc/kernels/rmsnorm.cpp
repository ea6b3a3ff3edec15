// RMS normalisation over the last dimension (Zhang & Sennrich 2019), llm.c style (our own code).
//
// B = batch, T = time, C = channels. The kernel sees the rows flattened: N = B * T rows of C
// values (any leading shape flattens to N; a multi-dimensional normalized_shape flattens to C).
//
// void rmsnorm_forward(T* out, T* rstd, const T* inp, const T* weight, int N, int C, T eps)
//   inp (N, C), weight (C) or nullptr  ->  out (N, C), rstd (N)
//   rstd = 1 / sqrt(sum(x^2) / C + eps),  out = x * rstd * weight
//   weight == nullptr means no scale (elementwise_affine=False). rstd is an output, as
//   layernorm's statistics are: the row's scale, handy to callers. Differentiated w.r.t. inp
//   and weight.
//
// Written like layernorm.cpp, for the engine and the vectoriser: the sum of squares runs in 64
// independent lanes (one fixed summation order for every vector width), and the scaling reads
// rstd from 64 lane copies, so that the reverse sweep sums its adjoint (sum_i g_i w_i x_i) in
// 64 lanes as well. The last C % 64 values go through plain loops.
#include <cmath>

template <typename T>
void rmsnorm_forward(T* out, T* rstd, const T* inp, const T* weight, int N, int C, T eps) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const T* x = inp + n * C;
        int nb = C / 64;  // full blocks of 64 values; then C % 64 more
        T q[64];
        for (int j = 0; j < 64; j++) q[j] = T(0);
        for (int k = 0; k < nb; k++) {
            for (int j = 0; j < 64; j++) {
                T v = x[k * 64 + j];
                q[j] += v * v;
            }
        }
        T sq = 0;
        for (int i = nb * 64; i < C; i++) sq += x[i] * x[i];
        for (int j = 0; j < 64; j++) sq += q[j];
        T s = T(1) / std::sqrt(sq / C + eps);
        T sv[64];
        for (int j = 0; j < 64; j++) sv[j] = s;
        T* o = out + n * C;
        for (int k = 0; k < nb; k++) {
            for (int j = 0; j < 64; j++) {
                int i = k * 64 + j;
                T w = weight != nullptr ? weight[i] : T(1);
                o[i] = x[i] * sv[j] * w;
            }
        }
        for (int i = nb * 64; i < C; i++) {
            T w = weight != nullptr ? weight[i] : T(1);
            o[i] = x[i] * s * w;
        }
        rstd[n] = s;
    }
}
