void poly_scalar_pullback(double x, double y, double _d_y, double* _d_x, double* _d_y0) {
    *_d_x += double(2) * (_d_y * (3.0 * x * y));
    *_d_y0 += _d_y * (3.0 * x * x);
    *_d_x += -_d_y / y;
    *_d_y0 += _d_y * x / (y * y);
}

void poly_scalar_grad(double x, double y, double* _d_x, double* _d_y0) {
    poly_scalar_pullback(x, y, double(1), _d_x, _d_y0);
}

double poly_scalar_reverse_forw(double x, double y, torchclad::Tape& _tape) {
    return 3.0 * x * x * y - x / y + 2.0;
}

void poly_scalar_reverse_sweep(double x, double y, double _d_y, double* _d_x, double* _d_y0, torchclad::Tape& _tape) {
    *_d_x += double(2) * (_d_y * (3.0 * x * y));
    *_d_y0 += _d_y * (3.0 * x * x);
    *_d_x += -_d_y / y;
    *_d_y0 += _d_y * x / (y * y);
}
