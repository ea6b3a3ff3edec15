void while_loop_pullback_pushforward(const double* x, int n, double a, double _d_y, double* _d_x, double* _d_a, const double* _d_x0, double _d_a0, double _d__d_y, double* _d__d_x, double* _d__d_a) {
    torchclad::Tape _tape;
    int i = 0;
    double _d_s0 = 0;
    double s = 1.0;
    {
        unsigned long _t0 = 0;
        while (i < n) {
            ++_t0;
            _tape.push(s);
            _tape.push(_d_s0);
            _d_s0 = _d_s0 * a + s * _d_a0 + _d_x0[i];
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
            _tape.push(_d_s0);
            _d_s0 += _d_x0[i] * a + x[i] * _d_a0;
            s += x[i] * a;
            --i;
        }
        _tape.push(_t1);
    }
    double _d__d_s = 0;
    double _d_s = double(0);
    _d__d_s += _d__d_y;
    _d_s += _d_y;
    {
        double _d__acc0 = 0;
        double _acc0 = double(0);
        for (unsigned long _t2 = _tape.pop<unsigned long>(); _t2; --_t2) {
            ++i;
            _d_s0 = _tape.pop<double>();
            s = _tape.pop<double>();
            _d__d_x[i] += _d__d_s * a + _d_s * _d_a0;
            _d_x[i] += _d_s * a;
            _d__acc0 += _d_x0[i] * _d_s + x[i] * _d__d_s;
            _acc0 += x[i] * _d_s;
        }
        if (_acc0 != double(0) || _d__acc0 != double(0)) {
            *_d__d_a += _d__acc0;
            *_d_a += _acc0;
        }
    }
    i = _tape.pop<int>();
    {
        double _d__acc1 = 0;
        double _acc1 = double(0);
        for (unsigned long _t3 = _tape.pop<unsigned long>(); _t3; --_t3) {
            i -= 2;
            double _d__r_d0 = _d__d_s;
            double _r_d0 = _d_s;
            _d__d_s = 0;
            _d_s = 0;
            _d_s0 = _tape.pop<double>();
            s = _tape.pop<double>();
            _d__d_s += _d__r_d0 * a + _r_d0 * _d_a0;
            _d_s += _r_d0 * a;
            _d__acc1 += _d_s0 * _r_d0 + s * _d__r_d0;
            _acc1 += s * _r_d0;
            _d__d_x[i] += _d__r_d0;
            _d_x[i] += _r_d0;
        }
        if (_acc1 != double(0) || _d__acc1 != double(0)) {
            *_d__d_a += _d__acc1;
            *_d_a += _acc1;
        }
    }
}
