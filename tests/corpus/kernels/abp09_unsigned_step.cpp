// AD-BUG-PATTERNS 9: unsigned counters moving by more than one, in loops whose reverse must run
// backwards (each iteration reads the running value). The reverse counts down from the last
// value; below the first one an unsigned counter wraps around instead of going negative
// (`i >= 0` never fails; from 2 by 3, `i >= 2` does not either), so the reverse must stop on
// the first value itself.
#include <cstddef>
double abp09_unsigned_step(const double* x, std::size_t n) {
  double s = 1.0;
  for (std::size_t i = 2; i < n; i += 3) s = s * x[i] + 1.0;
  double p = 0.0;
  for (unsigned i = 0; i < n; i += 4) p = p * 0.5 + x[i] * x[i];
  return s + p;
}
