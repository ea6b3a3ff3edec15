void abp02_alias_local_pullback(double x, double _d_y, double* _d_x) {
    double y = 0;
    double* p = &y;
    p[0] = x * x;
    double _d_y0 = double(0);
    _d_y0 += _d_y;
    double _r_d0 = _d_y0;
    _d_y0 = 0;
    *_d_x += double(2) * (_r_d0 * x);
}

void abp02_alias_local_grad(double x, double* _d_x) {
    abp02_alias_local_pullback(x, double(1), _d_x);
}

double abp02_alias_local_reverse_forw(double x, torchclad::Tape& _tape) {
    double y = 0;
    double* p = &y;
    p[0] = x * x;
    return y;
}

void abp02_alias_local_reverse_sweep(double x, double _d_y, double* _d_x, torchclad::Tape& _tape) {
    double _d_y0 = double(0);
    _d_y0 += _d_y;
    double _r_d0 = _d_y0;
    _d_y0 = 0;
    *_d_x += double(2) * (_r_d0 * x);
}
