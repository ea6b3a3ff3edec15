void switch_basic_pullback(const double* x, const int* op, int n, double _d_y, double* _d_x) {
    torchclad::Tape _tape;
    double s = 0.0;
    for (int i = 0; i < n; ++i) {
        {
            int _sw0 = op[i];
            bool _fall0 = false;
            bool _brk0 = false;
            bool _t0 = !_brk0 && (_fall0 || _sw0 == 0);
            if (_t0) {
                _fall0 = true;
                _tape.push(s);
                s += x[i];
                _brk0 = true;
            }
            _tape.push(_t0);
            bool _t1 = !_brk0 && (_fall0 || _sw0 == 1);
            if (_t1) {
                _fall0 = true;
                _tape.push(s);
                s += x[i] * x[i];
                _brk0 = true;
            }
            _tape.push(_t1);
            bool _t2 = !_brk0 && (_fall0 || _sw0 == 2 || _sw0 == 3);
            if (_t2) {
                _fall0 = true;
                _tape.push(s);
                s = s * x[i];
            }
            _tape.push(_t2);
            bool _t3 = !_brk0 && (_fall0 || _sw0 == 4);
            if (_t3) {
                _fall0 = true;
                _tape.push(s);
                s -= 0.5 * x[i];
                _brk0 = true;
            }
            _tape.push(_t3);
            bool _t4 = !_brk0 && (_fall0 || (_sw0 != 0 && _sw0 != 1 && _sw0 != 2 && _sw0 != 3 && _sw0 != 4));
            if (_t4) {
                _fall0 = true;
                _tape.push(s);
                s += std::cos(x[i]);
            }
            _tape.push(_t4);
        }
    }
    double _d_s = double(0);
    _d_s += _d_y;
    for (int i = n; i-- > 0; ) {
        {
            if (_tape.pop<bool>()) {
                s = _tape.pop<double>();
                _d_x[i] += -_d_s * std::sin(x[i]);
            }
            if (_tape.pop<bool>()) {
                s = _tape.pop<double>();
                _d_x[i] += 0.5 * -_d_s;
            }
            if (_tape.pop<bool>()) {
                double _r_d0 = _d_s;
                _d_s = 0;
                s = _tape.pop<double>();
                _d_s += _r_d0 * x[i];
                _d_x[i] += s * _r_d0;
            }
            if (_tape.pop<bool>()) {
                s = _tape.pop<double>();
                _d_x[i] += double(2) * (_d_s * x[i]);
            }
            if (_tape.pop<bool>()) {
                s = _tape.pop<double>();
                _d_x[i] += _d_s;
            }
        }
    }
}

void switch_basic_grad(const double* x, const int* op, int n, double* _d_x) {
    switch_basic_pullback(x, op, n, double(1), _d_x);
}

double switch_basic_reverse_forw(const double* x, const int* op, int n, torchclad::Tape& _tape) {
    double s = 0.0;
    for (int i = 0; i < n; ++i) {
        {
            int _sw0 = op[i];
            bool _fall0 = false;
            bool _brk0 = false;
            bool _t0 = !_brk0 && (_fall0 || _sw0 == 0);
            if (_t0) {
                _fall0 = true;
                _tape.push(s);
                s += x[i];
                _brk0 = true;
            }
            _tape.push(_t0);
            bool _t1 = !_brk0 && (_fall0 || _sw0 == 1);
            if (_t1) {
                _fall0 = true;
                _tape.push(s);
                s += x[i] * x[i];
                _brk0 = true;
            }
            _tape.push(_t1);
            bool _t2 = !_brk0 && (_fall0 || _sw0 == 2 || _sw0 == 3);
            if (_t2) {
                _fall0 = true;
                _tape.push(s);
                s = s * x[i];
            }
            _tape.push(_t2);
            bool _t3 = !_brk0 && (_fall0 || _sw0 == 4);
            if (_t3) {
                _fall0 = true;
                _tape.push(s);
                s -= 0.5 * x[i];
                _brk0 = true;
            }
            _tape.push(_t3);
            bool _t4 = !_brk0 && (_fall0 || (_sw0 != 0 && _sw0 != 1 && _sw0 != 2 && _sw0 != 3 && _sw0 != 4));
            if (_t4) {
                _fall0 = true;
                _tape.push(s);
                s += std::cos(x[i]);
            }
            _tape.push(_t4);
        }
    }
    _tape.push(s);
    return s;
}

void switch_basic_reverse_sweep(const double* x, const int* op, int n, double _d_y, double* _d_x, torchclad::Tape& _tape) {
    double s = _tape.pop<double>();
    double _d_s = double(0);
    _d_s += _d_y;
    for (int i = n; i-- > 0; ) {
        {
            if (_tape.pop<bool>()) {
                s = _tape.pop<double>();
                _d_x[i] += -_d_s * std::sin(x[i]);
            }
            if (_tape.pop<bool>()) {
                s = _tape.pop<double>();
                _d_x[i] += 0.5 * -_d_s;
            }
            if (_tape.pop<bool>()) {
                double _r_d0 = _d_s;
                _d_s = 0;
                s = _tape.pop<double>();
                _d_s += _r_d0 * x[i];
                _d_x[i] += s * _r_d0;
            }
            if (_tape.pop<bool>()) {
                s = _tape.pop<double>();
                _d_x[i] += double(2) * (_d_s * x[i]);
            }
            if (_tape.pop<bool>()) {
                s = _tape.pop<double>();
                _d_x[i] += _d_s;
            }
        }
    }
}
