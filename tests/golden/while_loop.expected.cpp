void while_loop_pullback(const double* x, int n, double a, double _d_y, double* _d_x, double* _d_a) {
    torchclad::Tape _tape;
    int i = 0;
    double s = 1.0;
    {
        unsigned long _t0 = 0;
        while (i < n) {
            ++_t0;
            _tape.push(s);
            s = s * a + x[i];
            i += 2;
        }
        _tape.push(_t0);
    }
    _tape.push(i);
    i = n - 1;
    {
        unsigned long _t1 = 0;
        while (i > 0 && s < 100.0) {
            ++_t1;
            _tape.push(s);
            s += x[i] * a;
            --i;
        }
        _tape.push(_t1);
    }
    double _d_s = double(0);
    _d_s += _d_y;
    {
        double _acc0 = double(0);
        for (unsigned long _t2 = _tape.pop<unsigned long>(); _t2; --_t2) {
            ++i;
            s = _tape.pop<double>();
            _d_x[i] += _d_s * a;
            _acc0 += x[i] * _d_s;
        }
        if (_acc0 != double(0)) {
            *_d_a += _acc0;
        }
    }
    i = _tape.pop<int>();
    {
        double _acc1 = double(0);
        for (unsigned long _t3 = _tape.pop<unsigned long>(); _t3; --_t3) {
            i -= 2;
            double _r_d0 = _d_s;
            _d_s = 0;
            s = _tape.pop<double>();
            _d_s += _r_d0 * a;
            _acc1 += s * _r_d0;
            _d_x[i] += _r_d0;
        }
        if (_acc1 != double(0)) {
            *_d_a += _acc1;
        }
    }
}

void while_loop_grad(const double* x, int n, double a, double* _d_x, double* _d_a) {
    while_loop_pullback(x, n, a, double(1), _d_x, _d_a);
}

double while_loop_reverse_forw(const double* x, int n, double a, torchclad::Tape& _tape) {
    int i = 0;
    double s = 1.0;
    {
        unsigned long _t0 = 0;
        while (i < n) {
            ++_t0;
            _tape.push(s);
            s = s * a + x[i];
            i += 2;
        }
        _tape.push(_t0);
    }
    _tape.push(i);
    i = n - 1;
    {
        unsigned long _t1 = 0;
        while (i > 0 && s < 100.0) {
            ++_t1;
            _tape.push(s);
            s += x[i] * a;
            --i;
        }
        _tape.push(_t1);
    }
    _tape.push(i);
    _tape.push(s);
    return s;
}

void while_loop_reverse_sweep(const double* x, int n, double a, double _d_y, double* _d_x, double* _d_a, torchclad::Tape& _tape) {
    double s = _tape.pop<double>();
    int i = _tape.pop<int>();
    double _d_s = double(0);
    _d_s += _d_y;
    {
        double _acc0 = double(0);
        for (unsigned long _t0 = _tape.pop<unsigned long>(); _t0; --_t0) {
            ++i;
            s = _tape.pop<double>();
            _d_x[i] += _d_s * a;
            _acc0 += x[i] * _d_s;
        }
        if (_acc0 != double(0)) {
            *_d_a += _acc0;
        }
    }
    i = _tape.pop<int>();
    {
        double _acc1 = double(0);
        for (unsigned long _t1 = _tape.pop<unsigned long>(); _t1; --_t1) {
            i -= 2;
            double _r_d0 = _d_s;
            _d_s = 0;
            s = _tape.pop<double>();
            _d_s += _r_d0 * a;
            _acc1 += s * _r_d0;
            _d_x[i] += _r_d0;
        }
        if (_acc1 != double(0)) {
            *_d_a += _acc1;
        }
    }
}
