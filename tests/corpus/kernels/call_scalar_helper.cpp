// Calls to a static helper and an inline helper returning a value.
// f = (x + y)² + (x³ + yx)·y²
static double square(double v) { return v * v; }
inline double cube_plus(double v, double c) { return v * v * v + c * v; }

double call_scalar_helper(double x, double y) {
  return square(x + y) + cube_plus(x, y) * square(y);
}
