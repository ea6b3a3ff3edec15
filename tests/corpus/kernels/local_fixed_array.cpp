// Fixed-size local arrays, one brace-initialised, one element overwritten after use.
double local_fixed_array(const double* x) {
  double buf[4];
  double acc[3] = {0.0, 1.0, 2.0};
  for (int i = 0; i < 4; ++i) buf[i] = x[i] * x[(i + 1) % 4];
  for (int i = 0; i < 3; ++i) acc[i] += buf[i] * buf[i + 1];
  buf[2] = acc[0] - buf[3];
  return acc[0] + acc[1] * acc[2] + buf[2];
}
