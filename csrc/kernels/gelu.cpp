// GELU (Hendrycks & Gimpel), llm.c style.
//
// B = batch, T = time, C = channels; elementwise, so the kernels see N = B * T * C.
//
// void gelu_forward(T* out, const T* inp, int N)       tanh approximation (GPT-2's GELU)
//   inp (N) -> out (N),  out = 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
// void gelu_erf_forward(T* out, const T* inp, int N)   exact form (torch's approximate="none")
//   inp (N) -> out (N),  out = 0.5 * x * (1 + erf(x / sqrt(2)))
//
// Function templates, so one source gives the float and the double kernel; torchclad's engine
// generates <name>_pullback (and the split-mode pair) from these bodies at install time,
// w.r.t. inp. The loops are OpenMP-parallel; so are the generated reverse loops (every
// iteration touches its own element).
#include <cmath>

#include <torchclad/parallel.h>

// The loops run in chunks of torchclad::elementwise_chunk(N) elements, one chunk per thread,
// each starting at a multiple of 64 (csrc/runtime/torchclad/parallel.h says why): the same
// bits at every thread count, and each thread's elements where the loop before left them.
template <typename T>
void gelu_forward(T* out, const T* inp, int N) {
    #pragma omp parallel for schedule(static, torchclad::elementwise_chunk(N))
    for (int i = 0; i < N; i++) {
        T x = inp[i];
        T cube = T(0.044715) * x * x * x;
        out[i] = T(0.5) * x * (T(1) + std::tanh(T(0.7978845608028654) * (x + cube)));
    }
}

template <typename T>
void gelu_erf_forward(T* out, const T* inp, int N) {
    #pragma omp parallel for schedule(static, torchclad::elementwise_chunk(N))
    for (int i = 0; i < N; i++) {
        T x = inp[i];
        out[i] = T(0.5) * x * (T(1) + std::erf(x * T(0.7071067811865476)));
    }
}
