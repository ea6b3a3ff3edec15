// continue inside a do-while jumps to the condition, which must still be evaluated (and counted).
double do_while_continue(const double* x, int n) {
  double s = 0.0;
  int i = 0;
  do {
    double v = x[i];
    i++;
    if (v < 0.0) continue;
    s += v * v * (i + 1);
    if (s > 50.0) break;
  } while (i < n);
  return s;
}
