// Loop order in the reverse sweep: scalars broadcast over a loop (a, b) get their adjoints as
// reductions, summed in fixed lanes (16) plus a remainder; n = 37 exercises both.
#include <cmath>

double order_lanes(double* z, const double* x, double a, double b, int n) {
    for (int i = 0; i < n; i++) z[i] = a * x[i] - std::exp(b * x[i]);
    double s = 0;
    for (int i = 0; i < n; i++) s += z[i] * z[i];
    return s;
}
