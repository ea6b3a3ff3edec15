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
//   Differentiated w.r.t. inp, weight, bias; the reverse sweep gets the row sums back from the
//   tape (two values per row) and recomputes the rest.
//   Not OpenMP-parallel on purpose: the engine would make the reverse loop an array reduction
//   over d weight / d bias, which crashes when they are nullptr (docs/ENGINE_REQUESTS.md nn-7).
#include <cmath>

template <typename T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias,
                       int N, int C, T eps) {
    for (int n = 0; n < N; n++) {
        const T* x = inp + n * C;
        T sum = 0;
        for (int i = 0; i < C; i++) sum += x[i];
        T m = sum / C;
        T sq = 0;
        for (int i = 0; i < C; i++) {
            T d = x[i] - m;
            sq += d * d;
        }
        T s = T(1) / std::sqrt(sq / C + eps);
        T* o = out + n * C;
        for (int i = 0; i < C; i++) {
            T xhat = (x[i] - m) * s;
            T w = weight != nullptr ? weight[i] : T(1);
            T sh = bias != nullptr ? bias[i] : T(0);
            o[i] = xhat * w + sh;
        }
        mean[n] = m;
        rstd[n] = s;
    }
}
