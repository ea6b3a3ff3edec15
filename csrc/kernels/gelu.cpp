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

#ifdef _OPENMP
#include <omp.h>
#endif

// The loops run in chunks of gelu_chunk(N) elements, one chunk per thread: consecutive
// elements, each chunk starting at a multiple of 64. Every element is computed by the same
// code path whatever the thread count (the vectorised loop and its scalar remainder split the
// elements the same way when every chunk starts at a multiple of the vector width; libmvec's
// vector erf/exp/tanh and libm's scalar ones may differ in the last bit), so gradients are
// bit-identical across thread counts. One chunk per thread, not chunks of 64 dealt out in
// turn: a thread's elements are the ones the loop before it (a GEMM split by rows) left in that
// core's cache, and the threads do not share cache lines; dealt out by 64, the fused demo
// model's GELU took 5-7x its one-thread time at two threads (perf, AMD EPYC).
inline int gelu_chunk(int N) {
#ifdef _OPENMP
    const int threads = omp_get_max_threads();
#else
    const int threads = 1;
#endif
    const long per = (static_cast<long>(N) + threads - 1) / threads;
    return per <= 64 ? 64 : static_cast<int>((per + 63) / 64 * 64);
}

template <typename T>
void gelu_forward(T* out, const T* inp, int N) {
    #pragma omp parallel for schedule(static, gelu_chunk(N))
    for (int i = 0; i < N; i++) {
        T x = inp[i];
        T cube = T(0.044715) * x * x * x;
        out[i] = T(0.5) * x * (T(1) + std::tanh(T(0.7978845608028654) * (x + cube)));
    }
}

template <typename T>
void gelu_erf_forward(T* out, const T* inp, int N) {
    #pragma omp parallel for schedule(static, gelu_chunk(N))
    for (int i = 0; i < N; i++) {
        T x = inp[i];
        out[i] = T(0.5) * x * (T(1) + std::erf(x * T(0.7071067811865476)));
    }
}
