// A checkpointed loop that walks a pointer along a trajectory buffer (written, not read) and
// keeps a running state in a scalar: the pointer is part of the snapshot.
#include <cmath>

double ckpt_moving_pointer(double* traj, const double* k, double x, int n) {
    double* out = traj;
#pragma torchclad checkpoint every(3)
    for (int i = 0; i < n; i++) {
        x = x + 0.1 * std::sin(k[i % 2] * x);
        *out = x * x;
        out = out + 1;
    }
    double s = 0;
    for (int i = 0; i < n; i++) s += traj[i] * (i + 1);
    return s + x;
}
