// One local buffer filled, read, normalised in place and refilled by callees; every read by a
// callee's reverse sweep needs the buffer's contents as they were at that call.
#include <cmath>
static void fill_pow(const double* x, double* buf, int n, double p) {
  for (int i = 0; i < n; ++i) buf[i] = std::pow(x[i], p);
}

static double weighted_sq_sum(const double* buf, const double* w, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += buf[i] * buf[i] * w[i];
  return s;
}

static void normalize_inplace(double* buf, int n) {
  double ss = 0.0;
  for (int i = 0; i < n; ++i) ss += buf[i] * buf[i];
  double r = 1.0 / std::sqrt(ss);
  for (int i = 0; i < n; ++i) buf[i] *= r;
}

double reuse_buffer_calls(const double* x, const double* w, int n) {
  double buf[8];
  fill_pow(x, buf, n, 2.0);
  double a = weighted_sq_sum(buf, w, n);
  normalize_inplace(buf, n);
  double b = weighted_sq_sum(buf, w, n);
  fill_pow(x, buf, n, 3.0);
  double c = weighted_sq_sum(buf, w, n);
  return a + b * c;
}
