// GELU, tanh approximation: 0.5 x (1 + tanh(√(2/π)(x + 0.044715 x³))).
#include <cmath>
static const double kGeluScale = 0.7978845608028654;  // sqrt(2 / pi)

void gelu_forward_d(double* out, const double* inp, int N) {
  for (int i = 0; i < N; i++) {
    double x = inp[i];
    double inner = kGeluScale * (x + 0.044715 * x * x * x);
    out[i] = 0.5 * x * (1.0 + std::tanh(inner));
  }
}
