// Comma operator (expression statement and for header), multiple declarators, nested ternaries.
double comma_ternary(double x, double y) {
  double a = 0.0, b = x;
  a = x * 2.0, b = a + y;
  double c = (a > b) ? a * y : b * x;
  double d = x < 0.0 ? -x : (y > 1.0 ? y * y : y);
  for (int i = 0, j = 3; i < j; ++i, --j) c += a * i - b * j;
  double e = (x > 0.5 && y < 3.0) ? (b > 0.0 ? b : -b) * c : c;
  return c + d + e;
}
