// Loops with a step from a parameter and a fixed negative step.
double loop_step_param(const double* x, int n, int step) {
  double s = 0.0;
  for (int i = 0; i < n; i += step) s += x[i] * x[i];
  double p = 1.0;
  for (int i = n - 1; i >= 0; i -= 3) p *= 1.0 + 0.5 * x[i];
  return s * p;
}
