void break_continue_pullback(const double* x, int n, double cap, double _d_y, double* _d_x, double* _d_cap) {
    torchclad::Tape _tape;
    double s = 0.0;
    {
        int i = 0;
        bool _brk0 = false;
        unsigned long _t3 = 0;
        while (!_brk0 && i < n) {
            ++_t3;
            bool _cnt0 = false;
            if (x[i] < 0.0) {
                _cnt0 = true;
            }
            bool _t1 = !_cnt0;
            if (_t1) {
                s += x[i] * x[i];
                if (s > cap) {
                    _brk0 = true;
                }
                bool _t0 = !_brk0;
                if (_t0) {
                    s = s * 1.1;
                }
                _tape.push(_t0);
            }
            _tape.push(_t1);
            bool _t2 = !_brk0;
            if (_t2) {
                ++i;
            }
            _tape.push(_t2);
        }
        _tape.push(_t3);
        _tape.push(i);
    }
    double _d_s = double(0);
    _d_s += _d_y;
    {
        int i = _tape.pop<int>();
        for (unsigned long _t4 = _tape.pop<unsigned long>(); _t4; --_t4) {
            if (_tape.pop<bool>()) {
                --i;
            }
            if (_tape.pop<bool>()) {
                if (_tape.pop<bool>()) {
                    double _r_d0 = _d_s;
                    _d_s = 0;
                    _d_s += _r_d0 * 1.1;
                }
                _d_x[i] += double(2) * (_d_s * x[i]);
            }
        }
    }
}

void break_continue_grad(const double* x, int n, double cap, double* _d_x, double* _d_cap) {
    break_continue_pullback(x, n, cap, double(1), _d_x, _d_cap);
}

double break_continue_reverse_forw(const double* x, int n, double cap, torchclad::Tape& _tape) {
    double s = 0.0;
    {
        int i = 0;
        bool _brk0 = false;
        unsigned long _t3 = 0;
        while (!_brk0 && i < n) {
            ++_t3;
            bool _cnt0 = false;
            if (x[i] < 0.0) {
                _cnt0 = true;
            }
            bool _t1 = !_cnt0;
            if (_t1) {
                s += x[i] * x[i];
                if (s > cap) {
                    _brk0 = true;
                }
                bool _t0 = !_brk0;
                if (_t0) {
                    s = s * 1.1;
                }
                _tape.push(_t0);
            }
            _tape.push(_t1);
            bool _t2 = !_brk0;
            if (_t2) {
                ++i;
            }
            _tape.push(_t2);
        }
        _tape.push(_t3);
        _tape.push(i);
    }
    return s;
}

void break_continue_reverse_sweep(const double* x, int n, double cap, double _d_y, double* _d_x, double* _d_cap, torchclad::Tape& _tape) {
    double _d_s = double(0);
    _d_s += _d_y;
    {
        int i = _tape.pop<int>();
        for (unsigned long _t0 = _tape.pop<unsigned long>(); _t0; --_t0) {
            if (_tape.pop<bool>()) {
                --i;
            }
            if (_tape.pop<bool>()) {
                if (_tape.pop<bool>()) {
                    double _r_d0 = _d_s;
                    _d_s = 0;
                    _d_s += _r_d0 * 1.1;
                }
                _d_x[i] += double(2) * (_d_s * x[i]);
            }
        }
    }
}
