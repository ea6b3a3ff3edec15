// A custom pullback with pointer parameters, deliberately 3x the true derivative:
// f = w·dot3(a, b)  →  ∂f/∂a = 3 w b,  ∂f/∂b = 3 w a,  ∂f/∂w = a·b.
double dot3(const double* a, const double* b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }

namespace clad {
namespace custom_derivatives {
void dot3_pullback(const double* a, const double* b, double _d_y, double* _d_a, double* _d_b) {
  for (int i = 0; i < 3; ++i) {
    _d_a[i] += 3.0 * b[i] * _d_y;
    _d_b[i] += 3.0 * a[i] * _d_y;
  }
}
}  // namespace custom_derivatives
}  // namespace clad

double custom_pullback_ptr(const double* a, const double* b, double w) { return w * dot3(a, b); }
