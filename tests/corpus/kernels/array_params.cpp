// Array-syntax parameters (decay to pointers): a non-const double[4], a const double[4], an int[2].
// f = Σ x_i w_i · scale[0] + x_0 x_3 · scale[1]
double array_params(double x[4], const double w[4], int scale[2]) {
  double s = 0.0;
  for (int i = 0; i < 4; ++i) s += x[i] * w[i];
  return s * scale[0] + x[0] * x[3] * scale[1];
}
