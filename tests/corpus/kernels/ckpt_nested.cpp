// A checkpointed loop inside another loop; what it reads (w[1]) is overwritten after it, so
// the recomputation must see the old value.
#include <cmath>

double ckpt_nested(double* w, const double* x, int n, int reps) {
    double s = 0;
    for (int r = 0; r < reps; r++) {
        double c = w[0];
#pragma torchclad checkpoint every(2)
        for (int i = 0; i < n; i++) {
            s = s * c + std::sin(x[i] * w[1]);
        }
        w[1] = w[1] * 0.5 + s * 0.01;
    }
    return s;
}
