// Hand-written LayerNorm backward, float32, llm.c style. A benchmark ORACLE only: it is compared
// with the engine-generated reverse sweep of csrc/kernels/layernorm.cpp (bench_reverse.py) and is
// never part of the torchclad package.
//
// B = batch, T = time, C = channels; rows flattened, N = B * T rows of C values.
//
// Forward (csrc/kernels/layernorm.cpp): xhat = (x - mean) * rstd, out = xhat * weight + bias,
// with mean (N) and rstd (N) written as outputs -- this backward reads them back, as llm.c does.
// For one row, with g = dout and dn = g * weight (the adjoint of xhat):
//   dbias   += g
//   dweight += g * xhat
//   dx      += rstd * (dn - mean(dn) - xhat * mean(dn * xhat))
// Two passes per row: the two means, then every update. Adjoints accumulate (+=).
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, int N, int C) {
    for (int n = 0; n < N; n++) {
        const float* x = inp + n * C;
        const float* g = dout + n * C;
        float* dx = dinp + n * C;
        const float m = mean[n];
        const float s = rstd[n];

        float dn_sum = 0.0f;
        float dn_xhat_sum = 0.0f;
        for (int i = 0; i < C; i++) {
            float xhat = (x[i] - m) * s;
            float dn = weight[i] * g[i];
            dn_sum += dn;
            dn_xhat_sum += dn * xhat;
        }
        const float dn_mean = dn_sum / C;
        const float dn_xhat_mean = dn_xhat_sum / C;

        for (int i = 0; i < C; i++) {
            float xhat = (x[i] - m) * s;
            float dn = weight[i] * g[i];
            dbias[i] += g[i];
            dweight[i] += g[i] * xhat;
            dx[i] += s * (dn - dn_mean - xhat * dn_xhat_mean);
        }
    }
}
