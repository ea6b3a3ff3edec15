// ++/-- on doubles (pre and post, value used) and on an int counter (no derivative).
// z = x, w = x + 2, k = 3:  f = 3x(x + 2) + y(y + 1) + xy
// ∂f/∂x = 6x + 6 + y,   ∂f/∂y = 2y + 1 + x.
double incdec(double x, double y) {
  double z = x;
  z++;
  ++z;
  double w = z--;
  --z;
  int k = 0;
  k++;
  ++k;
  k++;
  double r = z * w * k;
  double y0 = y++;
  r += y0 * y;
  --y;
  return r + y * x;
}
