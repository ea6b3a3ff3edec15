// A template helper instantiated from a plain double function.
template <typename T>
T weighted_sq(T v, T w) {
  return w * v * v;
}

double call_template_helper(double x, double y) {
  return weighted_sq(x, y) + weighted_sq<double>(y, 2.0) * x;
}
