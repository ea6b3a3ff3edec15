// The callee's body uses goto, which the engine does not differentiate; it has both custom
// derivatives, written as for Clad: the pullback (reverse mode) and the pushforward (forward
// mode, which returns clad::ValueAndPushforward). clampish(v) = v³ for v > 0, else v.
#include <torchclad/runtime.h>

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
::clad::ValueAndPushforward<double, double> clampish_pushforward(double v, double _d_v) {
  return {clampish(v), (v > 0.0 ? 3.0 * v * v : 1.0) * _d_v};
}
}  // namespace custom_derivatives
}  // namespace clad

double custom_pushforward_opaque(double x, double y) { return clampish(x) * y + clampish(-y); }
