void comma_expr_pullback(double a, double b, double c, double _d_y, double* _d_a, double* _d_b, double* _d_c) {
    torchclad::Tape _tape;
    a += 1.0;
    double t = a * b;
    _tape.push(b);
    b = c * t;
    if (c > 0) {
        _tape.push(t);
        t = t * a;
    } else {
        _tape.push(t);
        t = -t;
    }
    double u = t;
    bool _cond0 = t > 0;
    bool _t0 = _cond0;
    if (_t0) {
        u += b * b;
        _cond0 = u > 0;
    }
    _tape.push(_t0);
    bool ok = _cond0;
    _tape.push(a);
    a = a * c;
    double _dl_a = double(0);
    double _dl_b = double(0);
    double _d_t = double(0);
    double _d_u = double(0);
    _d_u += _d_y * (ok ? 2.0 : 1.0);
    _dl_a += _d_y;
    double _r_d3 = _dl_a;
    _dl_a = 0;
    a = _tape.pop<double>();
    _dl_a += _r_d3 * c;
    *_d_c += a * _r_d3;
    if (_tape.pop<bool>()) {
        _dl_b += double(2) * (_d_u * b);
    }
    _d_t += _d_u;
    if (c > 0) {
        double _r_d1 = _d_t;
        _d_t = 0;
        t = _tape.pop<double>();
        _d_t += _r_d1 * a;
        _dl_a += t * _r_d1;
    } else {
        double _r_d2 = _d_t;
        _d_t = 0;
        t = _tape.pop<double>();
        _d_t += -_r_d2;
    }
    double _r_d0 = _dl_b;
    _dl_b = 0;
    b = _tape.pop<double>();
    *_d_c += _r_d0 * t;
    _d_t += c * _r_d0;
    _dl_a += _d_t * b;
    _dl_b += a * _d_t;
    *_d_a += _dl_a;
    *_d_b += _dl_b;
}

void comma_expr_grad(double a, double b, double c, double* _d_a, double* _d_b, double* _d_c) {
    comma_expr_pullback(a, b, c, double(1), _d_a, _d_b, _d_c);
}

double comma_expr_reverse_forw(double a, double b, double c, torchclad::Tape& _tape) {
    a += 1.0;
    double t = a * b;
    _tape.push(b);
    b = c * t;
    if (c > 0) {
        _tape.push(t);
        t = t * a;
    } else {
        _tape.push(t);
        t = -t;
    }
    double u = t;
    bool _cond0 = t > 0;
    bool _t0 = _cond0;
    if (_t0) {
        u += b * b;
        _cond0 = u > 0;
    }
    _tape.push(_t0);
    bool ok = _cond0;
    _tape.push(a);
    a = a * c;
    _tape.push(a);
    _tape.push(b);
    _tape.push(t);
    _tape.push(_cond0);
    return u * (ok ? 2.0 : 1.0) + a;
}

void comma_expr_reverse_sweep(double a, double b, double c, double _d_y, double* _d_a, double* _d_b, double* _d_c, torchclad::Tape& _tape) {
    double _dl_a = double(0);
    double _dl_b = double(0);
    bool _cond0 = _tape.pop<bool>();
    double t = _tape.pop<double>();
    b = _tape.pop<double>();
    a = _tape.pop<double>();
    bool ok = _cond0;
    double _d_t = double(0);
    double _d_u = double(0);
    _d_u += _d_y * (ok ? 2.0 : 1.0);
    _dl_a += _d_y;
    double _r_d3 = _dl_a;
    _dl_a = 0;
    a = _tape.pop<double>();
    _dl_a += _r_d3 * c;
    *_d_c += a * _r_d3;
    if (_tape.pop<bool>()) {
        _dl_b += double(2) * (_d_u * b);
    }
    _d_t += _d_u;
    if (c > 0) {
        double _r_d1 = _d_t;
        _d_t = 0;
        t = _tape.pop<double>();
        _d_t += _r_d1 * a;
        _dl_a += t * _r_d1;
    } else {
        double _r_d2 = _d_t;
        _d_t = 0;
        t = _tape.pop<double>();
        _d_t += -_r_d2;
    }
    double _r_d0 = _dl_b;
    _dl_b = 0;
    b = _tape.pop<double>();
    *_d_c += _r_d0 * t;
    _d_t += c * _r_d0;
    _dl_a += _d_t * b;
    _dl_b += a * _d_t;
    *_d_a += _dl_a;
    *_d_b += _dl_b;
}
