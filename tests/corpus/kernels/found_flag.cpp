// bool locals steering the flow: the first element above t is squared, later ones are halved.
double found_flag(const double* x, int n, double t) {
  bool found = false;
  double s = 0.0;
  for (int i = 0; i < n; ++i) {
    if (!found && x[i] > t) {
      found = true;
      s += x[i] * x[i];
    } else if (found) {
      s += 0.5 * x[i];
    }
  }
  return found ? s * t : -s;
}
