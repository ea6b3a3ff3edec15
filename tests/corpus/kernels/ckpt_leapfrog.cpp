// Leapfrog steps of n pendulums with the state named in the pragma: q[0:n] and p[0:n].
#include <cmath>

void ckpt_leapfrog(double* q, double* p, const double* k, int n, int steps, double h) {
#pragma torchclad checkpoint every(4) state(q[0:n], p[0:n])
    for (int s = 0; s < steps; s++) {
        for (int j = 0; j < n; j++) p[j] -= 0.5 * h * k[j] * std::sin(q[j]);
        for (int j = 0; j < n; j++) q[j] += h * p[j];
        for (int j = 0; j < n; j++) p[j] -= 0.5 * h * k[j] * std::sin(q[j]);
    }
}
