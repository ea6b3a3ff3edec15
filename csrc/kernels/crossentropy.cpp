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
//   elements j, 64 + j, ...), combined at the end: a vectorisable loop with a fixed summation
//   order (the same result for every vector width). The argmax is an int (no derivative); the
//   lane maxima only steer the comparisons.
// - The rows are independent: `omp parallel for`, in the forward (the engine records the argmax
//   and the sum of each row in per-row slots) and in the generated reverse (each row's reverse
//   writes only its own row of d logits).
#include <torchclad/runtime.h>  // torchclad::detach
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
        int nb = C / 64;  // full blocks of 64; the rest, C % 64 values, after them
        // argmax over 64 lanes, then over the lanes' winners and the tail
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
        int imax = 0;
        for (int j = 0; j < 64; j++) imax = x[iv[j]] > x[imax] ? iv[j] : imax;
        for (int i = nb * 64; i < C; i++) imax = x[i] > x[imax] ? i : imax;
        T mx = torchclad::detach(x[imax]);  // the shift: no derivative (see above)
        // sum of exp(x - mx) over 64 lanes
        T a[64];
        for (int j = 0; j < 64; j++) a[j] = T(0);
        for (int k = 0; k < nb; k++) {
            for (int j = 0; j < 64; j++) a[j] += std::exp(x[k * 64 + j] - mx);
        }
        T sum = 0;
        for (int i = nb * 64; i < C; i++) sum += std::exp(x[i] - mx);
        for (int j = 0; j < 64; j++) sum += a[j];
        losses[n] = t < 0 ? T(0) : std::log(sum) - (x[tt] - mx);  // shifted first: exact for big logits
    }
}
