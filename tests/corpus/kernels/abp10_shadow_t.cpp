// AD-BUG-PATTERNS 10: an inner double t shadows the outer t (in a loop body and in a block).
// t = xy;  s = Σ_{i<3} (x + i)² + 2y;  f = s·t.
double abp10_shadow_t(double x, double y) {
  double t = x * y;
  double s = 0.0;
  for (int i = 0; i < 3; ++i) {
    double t = x + i;
    s += t * t;
  }
  {
    double t = y * 2.0;
    s += t;
  }
  return s * t;
}
