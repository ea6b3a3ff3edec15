// Hand-written softmax + cross-entropy backward, float32, llm.c style. A benchmark ORACLE only:
// compared with the engine-generated reverse sweep of crossentropy_forward
// (csrc/kernels/crossentropy.cpp) by bench_reverse.py; never part of the torchclad package.
//
// N = B * T rows of C = V logits. The forward writes only losses[n] = lse_n - x[target], where
// lse_n = log sum_i exp(x_i); it keeps no probabilities (llm.c's forward does). So the row's
// log-sum-exp is recovered from the forward's output, lse_n = losses[n] + x[target], and
//   dx_i += dloss_n * (exp(x_i - lse_n) - [i == target])
// costs one exp per logit, one pass -- what the forward's softmax costs, no max / sum passes.
// (Exact to a few ulp of lse; fine for logits of moderate size, as at the benchmark sizes.)
// targets[n] < 0: ignored row, no gradient. Adjoints accumulate (+=).
#include <cmath>

void crossentropy_backward(float* dlogits, const float* logits, const long* targets,
                           const float* losses, const float* dlosses, int N, int C) {
    for (int n = 0; n < N; n++) {
        long t = targets[n];
        if (t < 0) continue;
        const float* x = logits + (long)n * C;
        float* dx = dlogits + (long)n * C;
        const float lse = losses[n] + x[t];
        const float g = dlosses[n];
        for (int i = 0; i < C; i++) dx[i] += g * std::exp(x[i] - lse);
        dx[t] -= g;
    }
}
