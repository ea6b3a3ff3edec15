// A parallel loop counting down, with a scalar parameter every iteration uses: the reverse
// adds into *_d_a from every iteration (one partial sum per chunk).
#include <cmath>
void omp_down(double* out, const double* x, double a, int n) {
  #pragma omp parallel for
  for (int i = n - 1; i >= 0; i--) out[i] = std::sin(a * x[i]) * x[i];
}
