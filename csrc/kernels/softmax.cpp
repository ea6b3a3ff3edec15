// Softmax over the last dimension, llm.c style (our own code).
//
// B = batch, T = time, C = channels. Rows flattened: N rows of C values (the Python side moves
// the softmax dimension last and makes the input contiguous).
//
// void softmax_forward(T* out, const T* inp, int N, int C)
//   inp (N, C) -> out (N, C),  out[n, i] = exp(x_i - max_j x_j) / sum_j exp(x_j - max_j x_j)
//   Each output is written once, in one pass after the max and the sum (no in-place
//   normalisation), so nothing but the row's argmax and sum goes on the tape.
//   Differentiated w.r.t. inp. A row of all -inf gives nan, like torch.
//   The row loop is OpenMP-parallel in the forward (the engine keeps the per-row argmax and sum
//   in per-row slots); the engine keeps the generated reverse loop serial.
#include <cmath>

template <typename T>
void softmax_forward(T* out, const T* inp, int N, int C) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const T* x = inp + n * C;
        T* o = out + n * C;
        int imax = 0;  // an int: the shift by the max carries no derivative of its own
        for (int i = 1; i < C; i++) {
            if (x[i] > x[imax]) imax = i;
        }
        T mx = C > 0 ? x[imax] : T(0);
        T sum = 0;
        for (int i = 0; i < C; i++) sum += std::exp(x[i] - mx);
        T inv = T(1) / sum;
        for (int i = 0; i < C; i++) o[i] = std::exp(x[i] - mx) * inv;
    }
}
