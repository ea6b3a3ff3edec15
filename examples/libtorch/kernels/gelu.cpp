// GELU, tanh approximation (GPT-2's): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// N = elements.
#include <cmath>

template <typename T>
void gelu(T* out, const T* inp, int N) {
  const T s = 0.7978845608028654;  // sqrt(2 / pi)
  for (int i = 0; i < N; i++) {
    T x = inp[i];
    T cube = 0.044715 * x * x * x;
    out[i] = 0.5 * x * (1 + std::tanh(s * (x + cube)));
  }
}
