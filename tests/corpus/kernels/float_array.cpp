// float arrays in and out.
#include <math.h>
void float_array(const float* x, const float* w, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] = tanhf(x[i] * w[i]) + 0.5f * x[i];
}
