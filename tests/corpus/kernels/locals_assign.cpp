// Locals declared, assigned and reassigned; a later overwrite of t must not leak into v.
// t = xy + x,  v = (t² − y)·t,  f = v + 2x.
double locals_assign(double x, double y) {
  double t = x * y;
  t = t + x;
  double u = t * t;
  u = u - y;
  double v;
  v = u * t;
  t = 2.0;
  return v + t * x;
}
