// A clad::custom_derivatives pullback takes precedence over differentiating the body.
// The custom pullback is deliberately 10x the true derivative so the test can tell it was used:
// f = sq(x)·y + sq(y)  with sq' := 20·v   →   ∂f/∂x = 20xy,  ∂f/∂y = x² + 20y.
double scaled_sq(double v) { return v * v; }

namespace clad {
namespace custom_derivatives {
void scaled_sq_pullback(double v, double _d_y, double* _d_v) { *_d_v += 10.0 * 2.0 * v * _d_y; }
}  // namespace custom_derivatives
}  // namespace clad

double custom_pullback_scaled(double x, double y) { return scaled_sq(x) * y + scaled_sq(y); }
