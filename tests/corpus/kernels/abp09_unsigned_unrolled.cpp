// AD-BUG-PATTERNS 9: llm.c's unrolled loop over an unsigned size. `i + 2 < n; i += 3` reads as
// `i < (n > 2 ? n - 2 : 0)` (n - 2 would wrap for n < 2); the reverse runs backwards (each
// iteration reads the running value) from the last value, with no trip count on the tape.
#include <cstddef>
double abp09_unsigned_unrolled(const double* x, std::size_t n) {
  double s = 1.0;
  for (std::size_t i = 0; i + 2 < n; i += 3) s = s * x[i] + x[i + 2];
  return s;
}
