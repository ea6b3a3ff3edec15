// NULL for a pointer, static_assert, short and long double, and a non-const global array
// read and written (Clad's Gradients.C f_static_assert, fn_global_var_use).
#include <cstddef>

double g_hist[3] = {0, 0, 0};

double null_globals(double x, const double* w, short k, long double z) {
    static_assert(sizeof(double) == 8, "unexpected double size");
    g_hist[0] = g_hist[1] = g_hist[2] = 0;   // each call starts from the same state
    double& slot = g_hist[k % 3];
    slot = x * (double)z;
    g_hist[(k + 1) % 3] += slot * x;
    double base = w == NULL ? 1.0 : w[0];
    return base * g_hist[0] + g_hist[1] * g_hist[2] + k * x;
}
