// int <-> floating casts. Values that went through an int carry no derivative:
// n = int(3x) and m = long(y) are constants of the derivative.
// f = n·x + k·y + m·x·y + (u mod 3)·x + n/2
double cast_int_float(double x, double y, int k) {
  int n = (int)(x * 3.0);
  double fn = (double)n;
  long m = static_cast<long>(y);
  double r = fn * x + static_cast<double>(k) * y;
  r += m * x * y;
  unsigned u = (unsigned)k;
  r += (double)(u % 3u) * x;
  int q = n / 2;
  r += q;
  return r;
}
