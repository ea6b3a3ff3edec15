// Loop order in the reverse sweep: a recurrence through memory (y[i] from y[i - 1]) must keep
// its reverse loop backwards; the elementwise loop after it may run forwards.
#include <cmath>

void order_recurrence(double* y, const double* w, int n) {
    for (int i = 1; i < n; i++) y[i] = 0.5 * y[i] + std::sin(w[i] * y[i - 1]);
    for (int i = 0; i < n; i++) y[i] = y[i] * w[i];
}
