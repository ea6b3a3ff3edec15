// Checkpointing with the state inferred: y[0:n] (every access is y[j] over one inner loop),
// a local array, and a user function called in the body.
#include <cmath>

static double smooth(double u, double v) { return u * std::tanh(v); }

void ckpt_inferred(double* y, const double* w, int n, int steps) {
    double acc[2] = {0.0, 1.0};
#pragma torchclad checkpoint
    for (int s = 0; s < steps; s++) {
        for (int j = 0; j < n; j++) {
            y[j] = y[j] + 0.1 * smooth(w[j], y[j] + acc[0]);
        }
        acc[0] = 0.9 * acc[0] + 0.1 * w[s % n] * acc[1];
    }
}
