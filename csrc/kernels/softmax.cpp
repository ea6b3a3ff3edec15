// Softmax over the last dimension, llm.c style (our own code).
//
// B = batch, T = time, C = channels. Rows flattened: N rows of C values (the Python side moves
// the softmax dimension last and makes the input contiguous).
//
// void softmax_forward(T* out, const T* inp, int N, int C)
//   inp (N, C) -> out (N, C),  out[n, i] = exp(x_i - m - log sum_j exp(x_j - m)), m = max_j x_j
//   Each output is written once, as one exp, in one pass after the max and the sum (no in-place
//   normalisation; `out` is TORCHCLAD_WRITE_ONCE), so nothing but the row's argmax and sum goes
//   on the tape, and the sweep reads the probabilities back from `out` (the derivative of exp
//   is its result) instead of computing them again.
//   Differentiated w.r.t. inp. A row of all -inf gives nan, like torch.
//   The row loop is OpenMP-parallel in the forward (the engine keeps the per-row argmax and sum
//   in per-row slots) and in the generated reverse (a row's reverse writes only its own row).
//
// Written for the engine and the vectoriser, like crossentropy.cpp: the shift is
// torchclad::detach(max) (a stop-gradient, exact in value: no derivative through the shift in the
// reverse sweep, where with the max itself it would be zero in exact arithmetic, computed as a
// serial reduction), and the max and the sum of exps run in 64 lanes (lane j sees elements j,
// 64 + j, ...; a fixed summation order for every vector width), the argmax being an int.
#include <torchclad/runtime.h>  // torchclad::detach
#include <cmath>

template <typename T>
void softmax_forward(T* TORCHCLAD_WRITE_ONCE out, const T* inp, int N, int C) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const T* x = inp + n * C;
        T* o = out + n * C;
        int nb = C / 64;  // full blocks of 64; the rest, C % 64 values, after them
        int imax = 0;
        if (C > 0) {
            T mv[64];
            int iv[64];
            for (int j = 0; j < 64; j++) {
                mv[j] = x[0];
                iv[j] = 0;
            }
            for (int k = 0; k < nb; k++) {
                for (int j = 0; j < 64; j++) {
                    T v = x[k * 64 + j];
                    bool up = v > mv[j];
                    iv[j] = up ? k * 64 + j : iv[j];
                    mv[j] = up ? v : mv[j];
                }
            }
            for (int j = 0; j < 64; j++) imax = x[iv[j]] > x[imax] ? iv[j] : imax;
            for (int i = nb * 64; i < C; i++) imax = x[i] > x[imax] ? i : imax;
        }
        T mx = C > 0 ? torchclad::detach(x[imax]) : T(0);  // the shift: no derivative
        T a[64];
        for (int j = 0; j < 64; j++) a[j] = T(0);
        for (int k = 0; k < nb; k++) {
            for (int j = 0; j < 64; j++) a[j] += std::exp(x[k * 64 + j] - mx);
        }
        T sum = 0;
        for (int i = nb * 64; i < C; i++) sum += std::exp(x[i] - mx);
        for (int j = 0; j < 64; j++) sum += a[j];
        T ls = std::log(sum);
        for (int i = 0; i < C; i++) o[i] = std::exp(x[i] - mx - ls);
    }
}
