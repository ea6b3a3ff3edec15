// AD-BUG-PATTERNS 10: user identifiers spelled like generated ones (_d_x, _t0, _r_d0, _t1, _d_y).
// _d_x = x·t0,  _r_d0 = _d_x + x,  f = (_r_d0² − _d_x)·x.
double abp10_reserved_names(double x, double _t0) {
  double _d_x = x * _t0;
  double _r_d0 = _d_x + x;
  double _t1 = _r_d0 * _r_d0;
  double _d_y = _t1 - _d_x;
  return _d_y * x;
}
