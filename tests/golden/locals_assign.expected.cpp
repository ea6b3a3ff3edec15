void locals_assign_pullback(double x, double y, double _d_y, double* _d_x, double* _d_y0) {
    torchclad::Tape _tape;
    double t = x * y;
    t = t + x;
    double u = t * t;
    u = u - y;
    _tape.push(t);
    t = 2.0;
    double _d_t = double(0);
    double _d_u = double(0);
    double _d_v = double(0);
    _d_v += _d_y;
    _d_t += _d_y * x;
    *_d_x += t * _d_y;
    _d_t = 0;
    t = _tape.pop<double>();
    double _r_d2 = _d_v;
    _d_v = 0;
    _d_u += _r_d2 * t;
    _d_t += u * _r_d2;
    double _r_d1 = _d_u;
    _d_u = 0;
    _d_u += _r_d1;
    *_d_y0 += -_r_d1;
    _d_t += double(2) * (_d_u * t);
    double _r_d0 = _d_t;
    _d_t = 0;
    _d_t += _r_d0;
    *_d_x += _r_d0;
    *_d_x += _d_t * y;
    *_d_y0 += x * _d_t;
}

void locals_assign_grad(double x, double y, double* _d_x, double* _d_y0) {
    locals_assign_pullback(x, y, double(1), _d_x, _d_y0);
}

double locals_assign_reverse_forw(double x, double y, torchclad::Tape& _tape) {
    double t = x * y;
    t = t + x;
    double u = t * t;
    u = u - y;
    double v = double(0);
    v = u * t;
    _tape.push(t);
    t = 2.0;
    _tape.push(t);
    _tape.push(u);
    return v + t * x;
}

void locals_assign_reverse_sweep(double x, double y, double _d_y, double* _d_x, double* _d_y0, torchclad::Tape& _tape) {
    double u = _tape.pop<double>();
    double t = _tape.pop<double>();
    double _d_t = double(0);
    double _d_u = double(0);
    double _d_v = double(0);
    _d_v += _d_y;
    _d_t += _d_y * x;
    *_d_x += t * _d_y;
    _d_t = 0;
    t = _tape.pop<double>();
    double _r_d2 = _d_v;
    _d_v = 0;
    _d_u += _r_d2 * t;
    _d_t += u * _r_d2;
    double _r_d1 = _d_u;
    _d_u = 0;
    _d_u += _r_d1;
    *_d_y0 += -_r_d1;
    _d_t += double(2) * (_d_u * t);
    double _r_d0 = _d_t;
    _d_t = 0;
    _d_t += _r_d0;
    *_d_x += _r_d0;
    *_d_x += _d_t * y;
    *_d_y0 += x * _d_t;
}
