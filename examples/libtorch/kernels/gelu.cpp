// GELU, tanh approximation (GPT-2's): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// N = elements. Constants are T: a double literal would turn the float kernel's math double.
#include <cmath>

template <typename T>
void gelu(T* out, const T* inp, int N) {
  const T s = T(0.7978845608028654);  // sqrt(2 / pi)
  const T a = T(0.044715);
  for (int i = 0; i < N; i++) {
    T x = inp[i];
    T cube = a * x * x * x;
    out[i] = T(0.5) * x * (T(1) + std::tanh(s * (x + cube)));
  }
}
