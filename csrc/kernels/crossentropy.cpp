// Fused softmax + cross-entropy (negative log-likelihood of the target class), our own code.
//
// B = batch, T = time, C = channels (here: classes, e.g. the vocabulary). Rows flattened: N = B * T.
//
// void crossentropy_forward(T* losses, const T* logits, const long* targets, int N, int C)
//   logits (N, C), targets (N) int64  ->  losses (N)
//   losses[n] = logsumexp(logits[n, :]) - logits[n, targets[n]]
//             = log(sum_i exp(logits[n, i] - m)) - (logits[n, targets[n]] - m)
//   for any shift m; the kernel takes m = max_i logits[n, i]: nothing is exponentiated above 0
//   (stable for logits of any magnitude), and the target's logit is shifted before anything is
//   added to it, so +-1e4 loses no digits.
//   targets[n] < 0 marks an ignored row: losses[n] = 0 and no gradient. The caller maps
//   ignore_index to -1 and checks every other target is in [0, C): the kernel indexes with it.
//   The reduction (mean over the rows not ignored, sum) is the caller's. Differentiated w.r.t.
//   logits; d logits[n, i] = d losses[n] * (softmax_i - [i == target]).
//
// Written for the engine and the vectoriser:
// - The shift is torchclad::detach(max) (a stop-gradient, exact in value): the result does not
//   depend on it, so the engine generates no derivative through it. With the max read directly
//   the sweep would carry d m = d - d * sum_i p_i, zero in exact arithmetic, as a serial
//   reduction next to every exp (and as the float32 error of the gradient at the argmax).
// - The row's maximum and its sum of exps are reduced in 64 independent lanes (lane j sees
//   elements j, 64 + j, ...). The argmax is an int (no derivative); the lane maxima only steer
//   the comparisons, and are folded by halves (a fixed tree of selects). The lane sums are
//   folded to 8 by a fixed tree and added in order. All vectorisable, with short dependency
//   chains and one fixed summation order (the same result for every vector width).
// - The values after the last full block of 64 go in 16 lanes over full blocks of 16 (counted
//   from the row's end), then one by one: a vocabulary of characters (C = 56, 65) has no full
//   block of 64, and its exps would all be scalar calls. The 16 lanes are counted as
//   std::min(16, C), which is 16 wherever a block of 16 exists: g++ unrolls a loop of a
//   constant 16 iterations into 16 scalar exp calls, and keeps (and vectorises) this one. The
//   bulk stays in 64 lanes: with one vector of lanes, the sums of a long row (V = 50304) become
//   latency-bound (measured 1.3x slower).
// - The rows are independent: `omp parallel for`, in the forward (the engine records the argmax
//   and the sum of each row in per-row slots) and in the generated reverse (each row's reverse
//   writes only its own row of d logits).
#include <torchclad/runtime.h>  // torchclad::detach
#include <algorithm>
#include <cmath>

template <typename T>
void crossentropy_forward(T* losses, const T* logits, const long* targets, int N, int C) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        long t = targets[n];
        // an in-range index for ignored rows (their loss is 0); `% C` changes no valid target
        // (0 <= t < C) and tells the engine the index stays in row n (the reverse rows then
        // run in parallel)
        long tt = (t < 0 ? 0 : t) % C;
        const T* x = logits + n * C;
        int nb = C / 64;                // full blocks of 64, then the rest (C % 64 values):
        int nb16 = (C - nb * 64) / 16;  // its full blocks of 16, counted from the row's end,
        int w16 = std::min(16, C);      // in 16 lanes (see above); then C % 16 values
        // argmax: 64 lanes over the blocks of 64, the first 16 of them also over the blocks of
        // 16, the lanes folded by halves (a fixed tree of selects, vectorisable), then the last
        // values one by one
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
        for (int k = 0; k < nb16; k++) {
            for (int j = 0; j < w16; j++) {
                int i = C - 16 - k * 16 + j;
                T v = x[i];
                bool up = v > mv[j];
                iv[j] = up ? i : iv[j];
                mv[j] = up ? v : mv[j];
            }
        }
        for (int f = 0; f < 6; f++) {
            int h = 32 >> f;  // 32, 16, ..., 1: lane j takes lane j + h when that one is larger
            for (int j = 0; j < h; j++) {
                bool up = mv[j + h] > mv[j];
                iv[j] = up ? iv[j + h] : iv[j];
                mv[j] = up ? mv[j + h] : mv[j];
            }
        }
        int imax = iv[0];
        for (int i = nb * 64; i < C - nb16 * 16; i++) imax = x[i] > x[imax] ? i : imax;
        T mx = torchclad::detach(x[imax]);  // the shift: no derivative (see above)
        // sum of exp(x - mx): 64 lanes over the full blocks of 64, then 16 lanes over the
        // full blocks of 16 of the rest, then the last C % 16 values one by one
        T a[64];
        for (int j = 0; j < 64; j++) a[j] = T(0);
        for (int k = 0; k < nb; k++) {
            for (int j = 0; j < 64; j++) a[j] += std::exp(x[k * 64 + j] - mx);
        }
        T b[16];
        for (int j = 0; j < 16; j++) b[j] = T(0);
        for (int k = 0; k < nb16; k++) {
            for (int j = 0; j < w16; j++) b[j] += std::exp(x[C - 16 - k * 16 + j] - mx);
        }
        T r[8];  // the 64 + 16 lanes in 8, each a fixed tree (vectorises; short dependency chains)
        for (int j = 0; j < 8; j++) {
            r[j] = (((a[j] + a[j + 8]) + (a[j + 16] + a[j + 24]))
                  + ((a[j + 32] + a[j + 40]) + (a[j + 48] + a[j + 56]))) + (b[j] + b[j + 8]);
        }
        T sum = 0;
        for (int i = nb * 64; i < C - nb16 * 16; i++) sum += std::exp(x[i] - mx);
        for (int j = 0; j < 8; j++) sum += r[j];
        losses[n] = t < 0 ? T(0) : std::log(sum) - (x[tt] - mx);  // shifted first: exact for big logits
    }
}
