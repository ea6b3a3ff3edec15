// A row cut into blocks of 4 elements, the last one partial, each block an iteration of the
// parallel loop: the three ways blocked C++ writes the end of a block (a local ?: , std::min
// in the condition, two comparisons joined by &&). Every block writes its own elements of
// out; w (one weight per position in a block) is read by every block (partial sums).
#include <algorithm>
#include <cmath>
void omp_blocked(double* out, const double* x, const double* w, int N) {
  #pragma omp parallel for
  for (int b = 0; b < (N + 3) / 4; b++) {
    int e = b * 4 + 4 < N ? b * 4 + 4 : N;
    for (int i = b * 4; i < e; i++) out[i] = x[i] * x[i] * w[i - b * 4];
    for (int i = b * 4; i < std::min(b * 4 + 4, N); i++) out[i] += std::sin(x[i]);
    for (int i = b * 4; i < b * 4 + 4 && i < N; i++) out[i] *= x[i];
  }
}
