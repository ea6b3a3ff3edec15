// Expression forms: chained assignment, calls nested as arguments of calls, a call in a condition,
// unary minus and plus, parenthesised compound expressions.
static double add(double a, double b) { return a + b; }
static double mul(double a, double b) { return a * b; }
static double sq(double v) { return v * v; }

double expr_forms(double x, double y) {
  double a, b, c;
  a = b = x * y;
  c = a = -(a + 1.0) * +b;
  double r = mul(add(x, y), sq(add(x, 2.0 * y)));
  if (sq(x - y) > 0.01) r += mul(c, b);
  return r - (a * (b - c)) / (1.0 + sq(b));
}
