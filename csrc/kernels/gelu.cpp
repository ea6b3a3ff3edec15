// GELU, tanh approximation (Hendrycks & Gimpel), llm.c style.
//
// Shapes: N = number of elements (B * T * C for an activation of batch B, time T, channels C).
//   inp (N) -> out (N)
//
// gelu(x) = 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
//
// A function template, so one source gives the float and the double kernel; torchclad's engine
// generates gelu_forward_pullback (and the split-mode pair) from this body at install time.
#include <cmath>

template <typename T>
void gelu_forward(T* out, const T* inp, int N) {
    for (int i = 0; i < N; i++) {
        T x = inp[i];
        T cube = T(0.044715) * x * x * x;
        out[i] = T(0.5) * x * (T(1) + std::tanh(T(0.7978845608028654) * (x + cube)));
    }
}
