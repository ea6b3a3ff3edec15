// AD-BUG-PATTERNS 10: parameters named like the generated adjoint parameters (_d_y, _d_x).
// f = _d_y² · _d_x + x·_d_y
double abp10_reserved_params(double x, double _d_y, double _d_x) {
  double _d__d_y = _d_y * _d_y;
  return _d__d_y * _d_x + x * _d_y;
}
