// Two levels of checkpointing: an outer checkpointed loop whose body runs an inner
// checkpointed recurrence on a local state array.
#include <cmath>

double ckpt_two_level(const double* a, double x0, int outer, int inner) {
    double x = x0;
    double acc = 0;
#pragma torchclad checkpoint every(2)
    for (int r = 0; r < outer; r++) {
        double st[2] = {x, a[r % 3]};
#pragma torchclad checkpoint
        for (int i = 0; i < inner; i++) {
            double t = st[0];
            st[0] = st[0] + 0.1 * std::sin(st[1] * t);
            st[1] = st[1] - 0.05 * std::cos(t);
        }
        x = st[0] * 0.9 + st[1] * 0.1;
        acc += x * x;
    }
    return acc;
}
