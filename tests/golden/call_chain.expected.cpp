double h_reverse_forw(double v, torchclad::Tape& _tape) {
    return std::exp(-v * v);
}

void h_reverse_sweep(double v, double _d_y, double* _d_v, torchclad::Tape& _tape) {
    const double _cse0 = std::exp(-v * v);
    *_d_v += -((_d_y * _cse0) * v);
    *_d_v += -v * (_d_y * _cse0);
}

double g_reverse_forw(double a, double b, torchclad::Tape& _tape) {
    double _call0 = h_reverse_forw(a, _tape);
    double _call1 = h_reverse_forw(b, _tape);
    _tape.push(_call0);
    return _call0 * b + _call1;
}

void g_reverse_sweep(double a, double b, double _d_y, double* _d_a, double* _d_b, torchclad::Tape& _tape) {
    double _call0 = _tape.pop<double>();
    double _d__call0 = double(0);
    double _d__call1 = double(0);
    _d__call0 += _d_y * b;
    *_d_b += _call0 * _d_y;
    _d__call1 += _d_y;
    double _r_d1 = _d__call1;
    _d__call1 = 0;
    double _r1 = double(0);
    h_reverse_sweep(b, _r_d1, &_r1, _tape);
    *_d_b += _r1;
    double _r_d0 = _d__call0;
    _d__call0 = 0;
    double _r0 = double(0);
    h_reverse_sweep(a, _r_d0, &_r0, _tape);
    *_d_a += _r0;
}

void call_chain_pullback(const double* x, int n, double w, double _d_y, double* _d_x, double* _d_w) {
    torchclad::Tape _tape;
    double s = 0.0;
    for (int i = 0; i < n; ++i) {
        double _call0 = g_reverse_forw(x[i], w, _tape);
        s += _call0 * x[i];
        _tape.push(_call0);
    }
    g_reverse_forw(s, w, _tape);
    double _d_s = double(0);
    double _d__call1 = double(0);
    _d__call1 += _d_y;
    double _r_d1 = _d__call1;
    _d__call1 = 0;
    double _r2 = double(0);
    double _r3 = double(0);
    g_reverse_sweep(s, w, _r_d1, &_r2, &_r3, _tape);
    _d_s += _r2;
    *_d_w += _r3;
    double _acc0 = double(0);
    for (int i = n; i-- > 0; ) {
        double _call0 = _tape.pop<double>();
        double _d__call0 = double(0);
        _d__call0 += _d_s * x[i];
        _d_x[i] += _call0 * _d_s;
        double _r_d0 = _d__call0;
        _d__call0 = 0;
        double _r0 = double(0);
        double _r1 = double(0);
        g_reverse_sweep(x[i], w, _r_d0, &_r0, &_r1, _tape);
        _d_x[i] += _r0;
        _acc0 += _r1;
    }
    if (_acc0 != double(0)) {
        *_d_w += _acc0;
    }
}

void call_chain_grad(const double* x, int n, double w, double* _d_x, double* _d_w) {
    call_chain_pullback(x, n, w, double(1), _d_x, _d_w);
}

double call_chain_reverse_forw(const double* x, int n, double w, torchclad::Tape& _tape) {
    double s = 0.0;
    for (int i = 0; i < n; ++i) {
        double _call0 = g_reverse_forw(x[i], w, _tape);
        s += _call0 * x[i];
        _tape.push(_call0);
    }
    double _call1 = g_reverse_forw(s, w, _tape);
    _tape.push(s);
    return _call1;
}

void call_chain_reverse_sweep(const double* x, int n, double w, double _d_y, double* _d_x, double* _d_w, torchclad::Tape& _tape) {
    double s = _tape.pop<double>();
    double _d_s = double(0);
    double _d__call1 = double(0);
    _d__call1 += _d_y;
    double _r_d1 = _d__call1;
    _d__call1 = 0;
    double _r2 = double(0);
    double _r3 = double(0);
    g_reverse_sweep(s, w, _r_d1, &_r2, &_r3, _tape);
    _d_s += _r2;
    *_d_w += _r3;
    double _acc0 = double(0);
    for (int i = n; i-- > 0; ) {
        double _call0 = _tape.pop<double>();
        double _d__call0 = double(0);
        _d__call0 += _d_s * x[i];
        _d_x[i] += _call0 * _d_s;
        double _r_d0 = _d__call0;
        _d__call0 = 0;
        double _r0 = double(0);
        double _r1 = double(0);
        g_reverse_sweep(x[i], w, _r_d0, &_r0, &_r1, _tape);
        _d_x[i] += _r0;
        _acc0 += _r1;
    }
    if (_acc0 != double(0)) {
        *_d_w += _acc0;
    }
}
