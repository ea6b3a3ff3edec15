// AD-BUG-PATTERNS 2: a local written through a pointer to it.  f = x²  →  2x.
double abp02_alias_local(double x) {
  double y = 0;
  double* p = &y;
  *p = x * x;
  return y;
}
