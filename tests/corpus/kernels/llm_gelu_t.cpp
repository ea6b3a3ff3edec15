// GELU (tanh approximation) as a template.
#include <cmath>
static const double kSqrt2OverPi = 0.7978845608028654;

template <typename T>
void gelu_forward_t(T* out, const T* inp, int N) {
  for (int i = 0; i < N; i++) {
    const T x = inp[i];
    const T cube = T(0.044715) * x * x * x;
    out[i] = T(0.5) * x * (T(1) + std::tanh(T(kSqrt2OverPi) * (x + cube)));
  }
}
