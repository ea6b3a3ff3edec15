// AD-BUG-PATTERNS 1: a local squared twice in a loop body (v *= v; v *= v;) is x⁴,
// so every iteration contributes 4x³:  f = n·x⁴  →  df/dx = 4·n·x³.
double abp01_square_twice(double x, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) {
    double v = x;
    v *= v;
    v *= v;
    s += v;
  }
  return s;
}
