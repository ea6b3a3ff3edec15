// SiLU (sigmoid-weighted linear unit, a.k.a. swish) and SwiGLU (Shazeer 2020), llm.c style
// (our own code).
//
// B = batch, T = time, C = channels; elementwise (SiLU) or over rows (SwiGLU).
//
// void silu_forward(T* out, const T* inp, int N)
//   inp (N) -> out (N),  out = x * sigmoid(x)
// void swiglu_forward(T* out, const T* inp, int N, int H)
//   inp (N, 2H) -> out (N, H),  out[n, h] = silu(inp[n, h]) * inp[n, H + h]
//   (the gate is the first half of each row, the value the second: one projection to 2H, as
//   torch.nn.GLU splits its input, with SiLU in place of the sigmoid)
//   Differentiated w.r.t. inp.
//
// The sigmoid is written in its two overflow-free forms, 1 / (1 + exp(-x)) for x >= 0 and
// exp(x) / (1 + exp(x)) below: with one form only, exp overflows to inf for large |x| of one
// sign, and the derivative the engine generates (quotients of that inf) would be NaN where the
// true one is 0. It is written out in each loop (not a helper function): a loop-local value
// the reverse sweep recomputes, where a call's result would be recorded on the tape element by
// element. The loops are OpenMP-parallel; so are the generated reverse loops (every iteration
// touches its own elements). SiLU's run in chunks of torchclad::elementwise_chunk(N), one per
// thread, as GELU's do (the same bits at every thread count); a SwiGLU row runs whole on one
// thread.
#include <cmath>

#include <torchclad/parallel.h>

template <typename T>
void silu_forward(T* out, const T* inp, int N) {
    #pragma omp parallel for schedule(static, torchclad::elementwise_chunk(N))
    for (int i = 0; i < N; i++) {
        T x = inp[i];
        T s = x >= T(0) ? T(1) / (T(1) + std::exp(-x)) : std::exp(x) / (T(1) + std::exp(x));
        out[i] = x * s;
    }
}

template <typename T>
void swiglu_forward(T* out, const T* inp, int N, int H) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const T* gate = inp + n * 2 * H;
        const T* value = gate + H;
        T* o = out + n * H;
        for (int h = 0; h < H; h++) {
            T g = gate[h];
            T s = g >= T(0) ? T(1) / (T(1) + std::exp(-g)) : std::exp(g) / (T(1) + std::exp(g));
            o[h] = g * s * value[h];
        }
    }
}
