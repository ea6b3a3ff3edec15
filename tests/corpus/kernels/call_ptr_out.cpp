// Callees writing through pointer parameters: into locals by address and into a local array.
#include <cmath>
static void polar(double r, double th, double* px, double* py) {
  *px = r * std::cos(th);
  *py = r * std::sin(th);
}

static void axpy(int n, double a, const double* x, double* y) {
  for (int i = 0; i < n; ++i) y[i] += a * x[i];
}

double call_ptr_out(double r, double th, const double* v) {
  double px, py;
  polar(r, th, &px, &py);
  double acc[3] = {px, py, 0.0};
  axpy(3, r, v, acc);
  return acc[0] * acc[1] + acc[2];
}
