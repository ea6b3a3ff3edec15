// A long recurrence with overwritten state, for the checkpointing tests and benchmark:
// explicit Euler steps of a chain of m damped pendulums, state y = (angles, velocities),
// updated in place.  The same body twice: taped records every step, checkpointed stores the
// state every K steps and recomputes in between.
#include <cmath>

void ode_taped(double* y, const double* k, int m, int nsteps, double h) {
    for (int s = 0; s < nsteps; s++) {
        for (int j = 0; j < m; j++) {
            double q = y[j];
            double left = j > 0 ? y[j - 1] : 0.0;
            double force = -k[j] * std::sin(q) + 0.1 * (left - q);
            y[m + j] = y[m + j] + h * (force - 0.05 * y[m + j]);
            y[j] = q + h * y[m + j];
        }
    }
}

void ode_checkpointed(double* y, const double* k, int m, int nsteps, double h) {
#pragma torchclad checkpoint state(y[0:2*m])
    for (int s = 0; s < nsteps; s++) {
        for (int j = 0; j < m; j++) {
            double q = y[j];
            double left = j > 0 ? y[j - 1] : 0.0;
            double force = -k[j] * std::sin(q) + 0.1 * (left - q);
            y[m + j] = y[m + j] + h * (force - 0.05 * y[m + j]);
            y[j] = q + h * y[m + j];
        }
    }
}

void ode_every(double* y, const double* k, int m, int nsteps, double h, int every) {
#pragma torchclad checkpoint every(every) state(y[0:2*m])
    for (int s = 0; s < nsteps; s++) {
        for (int j = 0; j < m; j++) {
            double q = y[j];
            double left = j > 0 ? y[j - 1] : 0.0;
            double force = -k[j] * std::sin(q) + 0.1 * (left - q);
            y[m + j] = y[m + j] + h * (force - 0.05 * y[m + j]);
            y[j] = q + h * y[m + j];
        }
    }
}
