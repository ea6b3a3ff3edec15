void abp10_reserved_names_pullback(double x, double t0_u, double _d_y, double* _d_x, double* _d_t0_u) {
    double d_x_u = x * t0_u;
    double r_d0_u = d_x_u + x;
    double t1_u = r_d0_u * r_d0_u;
    double d_y_u = t1_u - d_x_u;
    double _d_d_x_u = double(0);
    double _d_r_d0_u = double(0);
    double _d_t1_u = double(0);
    double _d_d_y_u = double(0);
    _d_d_y_u += _d_y * x;
    *_d_x += d_y_u * _d_y;
    _d_t1_u += _d_d_y_u;
    _d_d_x_u += -_d_d_y_u;
    _d_r_d0_u += double(2) * (_d_t1_u * r_d0_u);
    _d_d_x_u += _d_r_d0_u;
    *_d_x += _d_r_d0_u;
    *_d_x += _d_d_x_u * t0_u;
    *_d_t0_u += x * _d_d_x_u;
}

void abp10_reserved_names_grad(double x, double t0_u, double* _d_x, double* _d_t0_u) {
    abp10_reserved_names_pullback(x, t0_u, double(1), _d_x, _d_t0_u);
}

double abp10_reserved_names_reverse_forw(double x, double t0_u, torchclad::Tape& _tape) {
    double d_x_u = x * t0_u;
    double r_d0_u = d_x_u + x;
    double t1_u = r_d0_u * r_d0_u;
    double d_y_u = t1_u - d_x_u;
    return d_y_u * x;
}

void abp10_reserved_names_reverse_sweep(double x, double t0_u, double _d_y, double* _d_x, double* _d_t0_u, torchclad::Tape& _tape) {
    double d_x_u = x * t0_u;
    double r_d0_u = d_x_u + x;
    double t1_u = r_d0_u * r_d0_u;
    double d_y_u = t1_u - d_x_u;
    double _d_d_x_u = double(0);
    double _d_r_d0_u = double(0);
    double _d_t1_u = double(0);
    double _d_d_y_u = double(0);
    _d_d_y_u += _d_y * x;
    *_d_x += d_y_u * _d_y;
    _d_t1_u += _d_d_y_u;
    _d_d_x_u += -_d_d_y_u;
    _d_r_d0_u += double(2) * (_d_t1_u * r_d0_u);
    _d_d_x_u += _d_r_d0_u;
    *_d_x += _d_r_d0_u;
    *_d_x += _d_d_x_u * t0_u;
    *_d_t0_u += x * _d_d_x_u;
}
