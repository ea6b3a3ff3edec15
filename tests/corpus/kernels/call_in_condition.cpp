// Calls nested as arguments of calls and a call inside an if condition (no ?: around calls).
static double add(double a, double b) { return a + b; }
static double mul(double a, double b) { return a * b; }
static double sq(double v) { return v * v; }

double call_in_condition(double x, double y) {
  double r = mul(add(x, y), sq(add(x, 2.0 * y)));
  if (sq(x - y) > 0.01) r += mul(sq(x), add(y, mul(x, y)));
  return r;
}
