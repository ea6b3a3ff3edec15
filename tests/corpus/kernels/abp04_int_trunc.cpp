// AD-BUG-PATTERNS 4: integer truncation.  n = int(x) has no derivative:  f = n·x  →  df/dx = n.
double abp04_int_trunc(double x) {
  int n = x;
  return n * x;
}
