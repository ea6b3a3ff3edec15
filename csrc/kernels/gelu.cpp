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

// schedule(static, 64): every element is computed by the same code path whatever the thread
// count (a chunk starts at a multiple of 64, so the vectorised loop and its scalar remainder
// split the elements the same way; libmvec's vector erf/exp/tanh and libm's scalar ones may
// differ in the last bit), so gradients are bit-identical across thread counts.
template <typename T>
void gelu_forward(T* out, const T* inp, int N) {
    #pragma omp parallel for schedule(static, 64)
    for (int i = 0; i < N; i++) {
        T x = inp[i];
        T cube = T(0.044715) * x * x * x;
        out[i] = T(0.5) * x * (T(1) + std::tanh(T(0.7978845608028654) * (x + cube)));
    }
}

template <typename T>
void gelu_erf_forward(T* out, const T* inp, int N) {
    #pragma omp parallel for schedule(static, 64)
    for (int i = 0; i < N; i++) {
        T x = inp[i];
        out[i] = T(0.5) * x * (T(1) + std::erf(x * T(0.7071067811865476)));
    }
}
