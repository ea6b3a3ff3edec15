// A callee updating an in/out state array in place, called three times on the same local array.
static void step(double* state, const double* x, int n, double a) {
  for (int i = 0; i < n; ++i) state[i] = state[i] * a + x[i] * state[(i + 1) % n];
}

double callee_inout_twice(const double* x, int n, double a) {
  double state[6];
  for (int i = 0; i < n; ++i) state[i] = 1.0 + 0.1 * x[i];
  step(state, x, n, a);
  step(state, x, n, a * a);
  step(state, x, n, 0.5);
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += state[i] * state[i];
  return s;
}
