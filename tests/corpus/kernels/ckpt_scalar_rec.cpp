// A scalar recurrence under checkpointing: the parameter x is the loop's whole state.
#include <cmath>

double ckpt_scalar_rec(double x, double a, int n) {
    double h = 0.1;
#pragma torchclad checkpoint every(3)
    for (int i = 0; i < n; i++) {
        x = x + h * std::sin(a * x);
    }
    return x;
}
