// The f-suffixed float functions.
#include <math.h>
float math_f_suffixed(float x, float y) {
  float s = expf(x) + logf(y) + log1pf(x) + sqrtf(y);
  s += powf(x, y) + sinf(x) * cosf(y) + tanf(0.3f * y);
  s += tanhf(x) + sinhf(y) - coshf(x) + erff(y);
  s += atanf(x) + atan2f(y, x);
  s += fabsf(x - 2.0f * y) + fmaxf(x, y) + fminf(x, 0.1f * y);
  s += floorf(3.0f * x) * y + ceilf(y) * x;
  return s;
}
