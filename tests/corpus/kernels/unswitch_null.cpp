// Optional arrays (a null pointer: absent), tested inside the loops in every spelling C and C++
// allow. The pointers are never assigned, so each test has one value throughout: the generated
// loops are versioned on them (opt/unswitch.py), a copy without the tests when every pointer the
// loop tests is non-null, the loop as written otherwise. `k` is a double from an int branch: the
// copy without the test must keep it a double (1 / 2 is 0 in int).
#include <cstddef>
void unswitch_null(double* out, const double* inp, const double* weight, const double* bias,
                   const double* scale, int N, int C) {
  for (int n = 0; n < N; n++) {
    double m = 0;
    for (int i = 0; i < C; i++) m += inp[n * C + i] * (weight ? weight[i] : 1.0);
    double k = (scale != nullptr ? 1 : 0.5) / 2;
    for (int i = 0; i < C; i++) {
      double y = inp[n * C + i] * m * k;
      if (bias != NULL) y += bias[i] * inp[n * C + i];
      if (!weight) y *= 2;
      if (scale == 0) {
      } else {
        y *= scale[i];
      }
      out[n * C + i] = y;
    }
  }
}
