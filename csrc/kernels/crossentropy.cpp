// Fused softmax + cross-entropy (negative log-likelihood of the target class), our own code.
//
// B = batch, T = time, C = channels (here: classes, e.g. the vocabulary). Rows flattened: N = B * T.
//
// void crossentropy_forward(T* losses, const T* logits, const long* targets, int N, int C)
//   logits (N, C), targets (N) int64  ->  losses (N)
//   losses[n] = logsumexp(logits[n, :]) - logits[n, targets[n]]
//             = log(sum_i exp(logits[n, i] - max)) - (logits[n, targets[n]] - max)
//   (stable for logits of any magnitude: nothing is exponentiated above 0, and the target's
//   logit is shifted by the max before anything is added to it, so +-1e4 loses no digits).
//   targets[n] < 0 marks an ignored row: losses[n] = 0 and no gradient. The caller maps
//   ignore_index to -1 and checks every other target is in [0, C): the kernel indexes with it.
//   The reduction (mean over the rows not ignored, sum) is the caller's. Differentiated w.r.t.
//   logits; d logits[n, i] = d losses[n] * (softmax_i - [i == target]).
#include <cmath>

template <typename T>
void crossentropy_forward(T* losses, const T* logits, const long* targets, int N, int C) {
    for (int n = 0; n < N; n++) {
        long t = targets[n];
        if (t < 0) {
            losses[n] = T(0);
        } else {
            const T* x = logits + n * C;
            int imax = 0;
            for (int i = 1; i < C; i++) {
                if (x[i] > x[imax]) imax = i;
            }
            T mx = x[imax];
            T sum = 0;
            for (int i = 0; i < C; i++) sum += std::exp(x[i] - mx);
            losses[n] = std::log(sum) - (x[t] - mx);  // shifted first: exact for big logits
        }
    }
}
