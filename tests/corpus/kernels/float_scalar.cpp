// float scalars with f-suffixed math and float <-> double casts along the way.
#include <math.h>
float float_scalar(float x, float y) {
  float a = x * y + 1.5f;
  float b = expf(0.5f * x) - sinf(y);
  double wide = (double)a * b;
  float back = (float)wide;
  return back / (1.0f + y * y) + sqrtf(a);
}
