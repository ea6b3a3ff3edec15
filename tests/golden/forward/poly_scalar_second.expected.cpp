void poly_scalar_pullback_pushforward(double x, double y, double _d_y, double* _d_x, double* _d_y0, double _d_x0, double _d_y1, double _d__d_y, double* _d__d_x, double* _d__d_y0) {
    *_d__d_x += double(2) * (_d__d_y * (3.0 * x * y) + _d_y * (3.0 * _d_x0 * y + 3.0 * x * _d_y1));
    *_d_x += double(2) * (_d_y * (3.0 * x * y));
    *_d__d_y0 += _d__d_y * (3.0 * x * x) + _d_y * (3.0 * _d_x0 * x + 3.0 * x * _d_x0);
    *_d_y0 += _d_y * (3.0 * x * x);
    *_d__d_x += (-_d__d_y * y - -_d_y * _d_y1) / (y * y);
    *_d_x += -_d_y / y;
    *_d__d_y0 += ((_d__d_y * x + _d_y * _d_x0) * (y * y) - _d_y * x * (_d_y1 * y + y * _d_y1)) / (y * y * (y * y));
    *_d_y0 += _d_y * x / (y * y);
}
