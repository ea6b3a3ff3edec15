void custom_pullback_scaled_pullback(double x, double y, double _d_y, double* _d_x, double* _d_y0) {
    double _call0 = scaled_sq(x);
    scaled_sq(y);
    double _d__call0 = double(0);
    double _d__call1 = double(0);
    _d__call0 += _d_y * y;
    *_d_y0 += _call0 * _d_y;
    _d__call1 += _d_y;
    double _r_d1 = _d__call1;
    _d__call1 = 0;
    double _r1 = double(0);
    clad::custom_derivatives::scaled_sq_pullback(y, _r_d1, &_r1);
    *_d_y0 += _r1;
    double _r_d0 = _d__call0;
    _d__call0 = 0;
    double _r0 = double(0);
    clad::custom_derivatives::scaled_sq_pullback(x, _r_d0, &_r0);
    *_d_x += _r0;
}

void custom_pullback_scaled_grad(double x, double y, double* _d_x, double* _d_y0) {
    custom_pullback_scaled_pullback(x, y, double(1), _d_x, _d_y0);
}

double custom_pullback_scaled_reverse_forw(double x, double y, torchclad::Tape& _tape) {
    double _call0 = scaled_sq(x);
    double _call1 = scaled_sq(y);
    _tape.push(_call0);
    return _call0 * y + _call1;
}

void custom_pullback_scaled_reverse_sweep(double x, double y, double _d_y, double* _d_x, double* _d_y0, torchclad::Tape& _tape) {
    double _call0 = _tape.pop<double>();
    double _d__call0 = double(0);
    double _d__call1 = double(0);
    _d__call0 += _d_y * y;
    *_d_y0 += _call0 * _d_y;
    _d__call1 += _d_y;
    double _r_d1 = _d__call1;
    _d__call1 = 0;
    double _r1 = double(0);
    clad::custom_derivatives::scaled_sq_pullback(y, _r_d1, &_r1);
    *_d_y0 += _r1;
    double _r_d0 = _d__call0;
    _d__call0 = 0;
    double _r0 = double(0);
    clad::custom_derivatives::scaled_sq_pullback(x, _r_d0, &_r0);
    *_d_x += _r0;
}
