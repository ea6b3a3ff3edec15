// Result written through a pointer to one scalar, then updated in place two ways.
// out = (xy + sin x)·y; its old contents are overwritten, so ∂/∂out_old = 0.
#include <cmath>
void out_scalar_ptr(double x, double y, double* out) {
  *out = x * y;
  *out += std::sin(x);
  out[0] *= y;
}
