// Hand-written softmax backward, float32, llm.c style. A benchmark ORACLE only: compared with the
// engine-generated reverse sweep of softmax_forward (csrc/kernels/softmax.cpp) by
// bench_reverse.py; never part of the torchclad package.
//
// N rows of C values (the attention shape: B * NH * T rows of T). With p = out (the forward's
// output, read back) and g = dout, for one row:
//   dx_i += p_i * (g_i - sum_j p_j g_j)
// No exp at all: the probabilities are the forward's output. Adjoints accumulate (+=).
void softmax_backward(float* dinp, const float* out, const float* dout, int N, int C) {
    for (int n = 0; n < N; n++) {
        const float* p = out + n * C;
        const float* g = dout + n * C;
        float* dx = dinp + n * C;
        float pg = 0.0f;
        for (int i = 0; i < C; i++) pg += p[i] * g[i];
        for (int i = 0; i < C; i++) dx[i] += p[i] * (g[i] - pg);
    }
}
