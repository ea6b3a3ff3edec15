// Log-sum-exp with a detached max shift: the result does not depend on the shift's value, so a
// stop-gradient on it leaves the gradient exact (softmax) and drops the shift's zero derivative.
#include <torchclad/runtime.h>
#include <cmath>

void detach_lse(double* out, const double* x, int N, int C) {
    for (int n = 0; n < N; n++) {
        const double* r = x + n * C;
        int imax = 0;
        for (int i = 1; i < C; i++)
            if (r[i] > r[imax]) imax = i;
        double mx = torchclad::detach(r[imax]);
        double s = 0;
        for (int i = 0; i < C; i++) s += std::exp(r[i] - mx);
        out[n] = std::log(s) + mx;
    }
}
