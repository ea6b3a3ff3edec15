// Addresses of locals and of local array elements, written directly and through a callee, with
// one pointer per object (address_of_local.cpp re-points one pointer between two locals, which
// the engine rejects: see tests/test_diagnostics.py).
// acc = xy + x²,  tmp = {x + acc, xy},  f = (x + xy + x²)·xy
static void add_square(double v, double* acc) { *acc += v * v; }

double address_of_local_fixed(double x, double y) {
  double acc = 0.0;
  double* p = &acc;
  *p += x * y;
  add_square(x, &acc);
  double tmp[2] = {x, y};
  double* q = &tmp[1];
  *q *= x;
  double* r = &tmp[0];
  *r = *r + acc;
  return tmp[0] * tmp[1];
}
