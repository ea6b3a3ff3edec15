// The callee's body uses goto, which the engine does not differentiate; its custom pullback is
// exact and must be used instead of looking at the body.  clampish(v) = v³ for v > 0, else v.
double clampish(double v) {
  double r = v;
  if (v <= 0.0) goto done;
  r = v * v * v;
done:
  return r;
}

namespace clad {
namespace custom_derivatives {
void clampish_pullback(double v, double _d_y, double* _d_v) {
  *_d_v += (v > 0.0 ? 3.0 * v * v : 1.0) * _d_y;
}
}  // namespace custom_derivatives
}  // namespace clad

double custom_pullback_opaque(double x, double y) { return clampish(x) * y + clampish(-y); }
