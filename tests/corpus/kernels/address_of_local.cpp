// Addresses of locals and of local array elements, written directly and through a callee.
// acc = xy + x²,  tmp = {x + acc, xy},  f = (x + xy + x²)·xy
static void add_square(double v, double* acc) { *acc += v * v; }

double address_of_local(double x, double y) {
  double acc = 0.0;
  double* p = &acc;
  *p += x * y;
  add_square(x, &acc);
  double tmp[2] = {x, y};
  double* q = &tmp[1];
  *q *= x;
  p = &tmp[0];
  *p = *p + acc;
  return tmp[0] * tmp[1];
}
