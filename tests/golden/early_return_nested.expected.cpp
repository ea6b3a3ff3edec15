void early_return_nested_pullback(const double* A, int n, double lim, double _d_y, double* _d_A, double* _d_lim) {
    torchclad::Tape _tape;
    bool _ret = false;
    double s = 0.0;
    {
        int i = 0;
        unsigned long _t6 = 0;
        while (!_ret && i < n) {
            ++_t6;
            {
                int j = 0;
                unsigned long _t2 = 0;
                while (!_ret && j < n) {
                    ++_t2;
                    _tape.push(s);
                    s += A[i * n + j] * A[j * n + i];
                    bool _t0 = s > lim;
                    if (_t0) {
                        _ret = true;
                    }
                    _tape.push(_t0);
                    bool _t1 = !_ret;
                    if (_t1) {
                        ++j;
                    }
                    _tape.push(_t1);
                }
                _tape.push(_t2);
                _tape.push(j);
            }
            bool _t3 = !_ret;
            if (_t3) {
                _tape.push(s);
                s = s * 0.9;
            }
            _tape.push(_t3);
            bool _t4 = !_ret;
            if (_t4) {
                ++i;
            }
            _tape.push(_t4);
        }
        _tape.push(_t6);
        _tape.push(i);
    }
    bool _t7 = !_ret;
    if (_t7) {
        _ret = true;
    }
    _tape.push(_t7);
    double _d__retval = double(0);
    double _d_s = double(0);
    _d__retval += _d_y;
    if (_tape.pop<bool>()) {
        double _r_d2 = _d__retval;
        _d__retval = 0;
        _d_s += _r_d2;
    }
    {
        int i = _tape.pop<int>();
        for (unsigned long _t8 = _tape.pop<unsigned long>(); _t8; --_t8) {
            if (_tape.pop<bool>()) {
                --i;
            }
            if (_tape.pop<bool>()) {
                double _r_d1 = _d_s;
                _d_s = 0;
                s = _tape.pop<double>();
                _d_s += _r_d1 * 0.9;
            }
            {
                int j = _tape.pop<int>();
                for (unsigned long _t5 = _tape.pop<unsigned long>(); _t5; --_t5) {
                    if (_tape.pop<bool>()) {
                        --j;
                    }
                    if (_tape.pop<bool>()) {
                        double _r_d0 = _d__retval;
                        _d__retval = 0;
                        _d_s += _r_d0 * lim;
                        *_d_lim += s * _r_d0;
                    }
                    s = _tape.pop<double>();
                    _d_A[i * n + j] += _d_s * A[j * n + i];
                    _d_A[j * n + i] += A[i * n + j] * _d_s;
                }
            }
        }
    }
}

void early_return_nested_grad(const double* A, int n, double lim, double* _d_A, double* _d_lim) {
    early_return_nested_pullback(A, n, lim, double(1), _d_A, _d_lim);
}

double early_return_nested_reverse_forw(const double* A, int n, double lim, torchclad::Tape& _tape) {
    bool _ret = false;
    double _retval = double(0);
    double s = 0.0;
    {
        int i = 0;
        unsigned long _t6 = 0;
        while (!_ret && i < n) {
            ++_t6;
            {
                int j = 0;
                unsigned long _t2 = 0;
                while (!_ret && j < n) {
                    ++_t2;
                    _tape.push(s);
                    s += A[i * n + j] * A[j * n + i];
                    bool _t0 = s > lim;
                    if (_t0) {
                        _retval = s * lim;
                        _ret = true;
                    }
                    _tape.push(_t0);
                    bool _t1 = !_ret;
                    if (_t1) {
                        ++j;
                    }
                    _tape.push(_t1);
                }
                _tape.push(_t2);
                _tape.push(j);
            }
            bool _t3 = !_ret;
            if (_t3) {
                _tape.push(s);
                s = s * 0.9;
            }
            _tape.push(_t3);
            bool _t4 = !_ret;
            if (_t4) {
                ++i;
            }
            _tape.push(_t4);
        }
        _tape.push(_t6);
        _tape.push(i);
    }
    bool _t7 = !_ret;
    if (_t7) {
        _retval = s;
        _ret = true;
    }
    _tape.push(_t7);
    _tape.push(s);
    return _retval;
}

void early_return_nested_reverse_sweep(const double* A, int n, double lim, double _d_y, double* _d_A, double* _d_lim, torchclad::Tape& _tape) {
    double s = _tape.pop<double>();
    double _d__retval = double(0);
    double _d_s = double(0);
    _d__retval += _d_y;
    if (_tape.pop<bool>()) {
        double _r_d2 = _d__retval;
        _d__retval = 0;
        _d_s += _r_d2;
    }
    {
        int i = _tape.pop<int>();
        for (unsigned long _t1 = _tape.pop<unsigned long>(); _t1; --_t1) {
            if (_tape.pop<bool>()) {
                --i;
            }
            if (_tape.pop<bool>()) {
                double _r_d1 = _d_s;
                _d_s = 0;
                s = _tape.pop<double>();
                _d_s += _r_d1 * 0.9;
            }
            {
                int j = _tape.pop<int>();
                for (unsigned long _t0 = _tape.pop<unsigned long>(); _t0; --_t0) {
                    if (_tape.pop<bool>()) {
                        --j;
                    }
                    if (_tape.pop<bool>()) {
                        double _r_d0 = _d__retval;
                        _d__retval = 0;
                        _d_s += _r_d0 * lim;
                        *_d_lim += s * _r_d0;
                    }
                    s = _tape.pop<double>();
                    _d_A[i * n + j] += _d_s * A[j * n + i];
                    _d_A[j * n + i] += A[i * n + j] * _d_s;
                }
            }
        }
    }
}
