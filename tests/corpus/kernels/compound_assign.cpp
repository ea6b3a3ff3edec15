// += -= *= /= on locals, including a local multiplied and divided by itself-derived values.
double compound_assign(double x, double y) {
  double a = x;
  a += y * y;
  a -= 0.5 * x;
  a *= x + 1.0;
  a /= y + 3.0;
  double b = a;
  b *= b;
  b /= x * x + 1.0;
  b -= a;
  b += y;
  return b;
}
