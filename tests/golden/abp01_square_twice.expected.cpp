void abp01_square_twice_pullback(double x, int n, double _d_y, double* _d_x) {
    torchclad::Tape _tape;
    for (int i = 0; i < n; ++i) {
        double v = x;
        _tape.push(v);
        v = v * v;
        _tape.push(v);
        v = v * v;
        _tape.push(v);
    }
    double _d_s = double(0);
    _d_s += _d_y;
    double _acc0 = double(0);
    for (int i = n; i-- > 0; ) {
        double v = _tape.pop<double>();
        double _d_v = double(0);
        _d_v += _d_s;
        double _r_d1 = _d_v;
        _d_v = 0;
        v = _tape.pop<double>();
        _d_v += double(2) * (_r_d1 * v);
        double _r_d0 = _d_v;
        _d_v = 0;
        v = _tape.pop<double>();
        _d_v += double(2) * (_r_d0 * v);
        _acc0 += _d_v;
    }
    if (_acc0 != double(0)) {
        *_d_x += _acc0;
    }
}

void abp01_square_twice_grad(double x, int n, double* _d_x) {
    abp01_square_twice_pullback(x, n, double(1), _d_x);
}

double abp01_square_twice_reverse_forw(double x, int n, torchclad::Tape& _tape) {
    double s = 0.0;
    for (int i = 0; i < n; ++i) {
        double v = x;
        _tape.push(v);
        v = v * v;
        _tape.push(v);
        v = v * v;
        s += v;
        _tape.push(v);
    }
    return s;
}

void abp01_square_twice_reverse_sweep(double x, int n, double _d_y, double* _d_x, torchclad::Tape& _tape) {
    double _d_s = double(0);
    _d_s += _d_y;
    double _acc0 = double(0);
    for (int i = n; i-- > 0; ) {
        double v = _tape.pop<double>();
        double _d_v = double(0);
        _d_v += _d_s;
        double _r_d1 = _d_v;
        _d_v = 0;
        v = _tape.pop<double>();
        _d_v += double(2) * (_r_d1 * v);
        double _r_d0 = _d_v;
        _d_v = 0;
        v = _tape.pop<double>();
        _d_v += double(2) * (_r_d0 * v);
        _acc0 += _d_v;
    }
    if (_acc0 != double(0)) {
        *_d_x += _acc0;
    }
}
