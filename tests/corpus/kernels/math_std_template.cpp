// Math through std:: inside a template (overloads picked by T).
#include <cmath>
template <typename T>
T math_std_template(T x, T y) {
  T r = std::sqrt(x * x + y * y);
  return std::exp(-r) * std::tanh(y) + std::log(T(1) + x * x) * std::cos(y) + std::pow(r, T(1.5));
}
