// Calls nested as arguments of calls, a call inside an if condition and inside a ternary.
static double add(double a, double b) { return a + b; }
static double mul(double a, double b) { return a * b; }
static double sq(double v) { return v * v; }

double nested_call_args(double x, double y) {
  double r = mul(add(x, y), sq(add(x, 2.0 * y)));
  if (sq(x - y) > 0.01) r += mul(sq(x), add(y, mul(x, y)));
  return sq(r) > 100.0 ? add(r, -x) : mul(r, sq(add(y, 1.0)));
}
