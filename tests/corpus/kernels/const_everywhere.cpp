// const on scalars, on pointees, on pointers, and on locals; east- and west-const spellings.
// f = Σ p_i q_i 2x + 0.5 Σ p_i
double const_everywhere(const double x, const double* const p, double const* q, const int n) {
  const double twice = 2.0 * x;
  double const half = 0.5;
  double s = 0.0;
  for (int i = 0; i < n; ++i) {
    const double pi = p[i];
    const double* const qi = q + i;
    s += pi * *qi * twice + half * pi;
  }
  return s;
}
