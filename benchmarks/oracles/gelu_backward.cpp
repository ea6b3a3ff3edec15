// Hand-written GELU (tanh approximation) backward, float32, llm.c style. A benchmark ORACLE only:
// compared with the engine-generated reverse sweep of gelu_forward (csrc/kernels/gelu.cpp) by
// bench_reverse.py; never part of the torchclad package.
//
// Elementwise over N = B * T * 4C values.
//   u   = sqrt(2/pi) * (x + 0.044715 x^3),  y = 0.5 x (1 + tanh u)
//   dy/dx = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
// One tanh per element (the forward's cost); adjoints accumulate (+=).
#include <cmath>

void gelu_backward(float* dinp, const float* inp, const float* dout, int N) {
    const float k = 0.7978845608028654f;  // sqrt(2 / pi)
    const float a = 0.044715f;
    for (int i = 0; i < N; i++) {
        float x = inp[i];
        float x2 = x * x;
        float th = std::tanh(k * (x + a * x2 * x));
        float local = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * k * (1.0f + 3.0f * a * x2);
        dinp[i] += local * dout[i];
    }
}
