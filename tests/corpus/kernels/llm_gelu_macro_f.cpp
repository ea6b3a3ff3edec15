// GELU on float arrays written with a #define'd constant built from M_PI, as C sources often are.
#include <math.h>
#define GELU_K sqrtf(2.0f / (float)M_PI)
#define CUBE(v) ((v) * (v) * (v))

void gelu_macro_f(float* out, const float* inp, int N) {
  for (int i = 0; i < N; i++) {
    float x = inp[i];
    out[i] = 0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * CUBE(x))));
  }
}
