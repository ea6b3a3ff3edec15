void accumulate_reverse_forw(double& acc, const double& x, double w, torchclad::Tape& _tape) {
    acc += w * x * x;
}

void accumulate_reverse_sweep(double& acc, const double& x, double w, double* _d_acc, double* _d_x, double* _d_w, torchclad::Tape& _tape) {
    *_d_w += _d_acc[0] * (x * x);
    _d_x[0] += double(2) * (_d_acc[0] * (w * x));
}

void ref_params_pullback(double& y, const double* x, int n, double w, double _d_y, double* _d_y0, double* _d_x, double* _d_w) {
    torchclad::Tape _tape;
    double s = 0;
    for (int i = 0; i < n; ++i) {
        _tape.push(s);
        accumulate_reverse_forw(s, x[i], w, _tape);
    }
    double& r = y;
    _tape.push(r);
    r = r * s + w;
    const double c = s * 2;
    double _d_s = double(0);
    double _d_c = double(0);
    _d_y0[&r - &y] += _d_y * c;
    _d_c += r * _d_y;
    _d_s += _d_c * 2;
    double _r_d0 = _d_y0[&r - &y];
    _d_y0[&r - &y] = 0;
    r = _tape.pop<double>();
    _d_y0[&r - &y] += _r_d0 * s;
    _d_s += r * _r_d0;
    *_d_w += _r_d0;
    double _acc0 = double(0);
    for (int i = n; i-- > 0; ) {
        double _r0 = double(0);
        accumulate_reverse_sweep(s, x[i], w, &_d_s, &_d_x[i], &_r0, _tape);
        _acc0 += _r0;
        s = _tape.pop<double>();
    }
    if (_acc0 != double(0)) {
        *_d_w += _acc0;
    }
}

void ref_params_grad(double& y, const double* x, int n, double w, double* _d_y0, double* _d_x, double* _d_w) {
    ref_params_pullback(y, x, n, w, double(1), _d_y0, _d_x, _d_w);
}

double ref_params_reverse_forw(double& y, const double* x, int n, double w, torchclad::Tape& _tape) {
    double s = 0;
    for (int i = 0; i < n; ++i) {
        _tape.push(s);
        accumulate_reverse_forw(s, x[i], w, _tape);
    }
    double& r = y;
    _tape.push(r);
    r = r * s + w;
    const double c = s * 2;
    _tape.push(s);
    _tape.push(&r);
    return r * c;
}

void ref_params_reverse_sweep(double& y, const double* x, int n, double w, double _d_y, double* _d_y0, double* _d_x, double* _d_w, torchclad::Tape& _tape) {
    double& r = *_tape.pop<double*>();
    double s = _tape.pop<double>();
    const double c = s * 2;
    double _d_s = double(0);
    double _d_c = double(0);
    _d_y0[&r - &y] += _d_y * c;
    _d_c += r * _d_y;
    _d_s += _d_c * 2;
    double _r_d0 = _d_y0[&r - &y];
    _d_y0[&r - &y] = 0;
    r = _tape.pop<double>();
    _d_y0[&r - &y] += _r_d0 * s;
    _d_s += r * _r_d0;
    *_d_w += _r_d0;
    double _acc0 = double(0);
    for (int i = n; i-- > 0; ) {
        double _r0 = double(0);
        accumulate_reverse_sweep(s, x[i], w, &_d_s, &_d_x[i], &_r0, _tape);
        _acc0 += _r0;
        s = _tape.pop<double>();
    }
    if (_acc0 != double(0)) {
        *_d_w += _acc0;
    }
}
