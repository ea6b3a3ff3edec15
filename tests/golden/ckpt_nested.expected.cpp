void ckpt_nested_pullback(double* w, const double* x, int n, int reps, double _d_y, double* _d_w, double* _d_x) {
    torchclad::Tape _tape;
    double s = 0;
    for (int r = 0; r < reps; ++r) {
        double c = w[0];
        {
            long _cp_n0 = n > 0 ? n : 0;
            long _cp_k0 = torchclad::checkpoint_every(_cp_n0, 2);
            for (long _cp_s0 = 0; _cp_s0 < _cp_n0; _cp_s0 += _cp_k0) {
                _tape.push(s);
                long _cp_e0 = _cp_s0 + _cp_k0 < _cp_n0 ? _cp_s0 + _cp_k0 : _cp_n0;
                for (int i = static_cast<int>(_cp_s0); i < static_cast<int>(_cp_e0); ++i) {
                    s = s * c + std::sin(x[i] * w[1]);
                }
            }
        }
        _tape.push(w[1]);
        w[1] = w[1] * 0.5 + s * 0.01;
        _tape.push(c);
    }
    double _d_s = double(0);
    _d_s += _d_y;
    for (int r = reps; r-- > 0; ) {
        double c = _tape.pop<double>();
        double _d_c = double(0);
        double _r_d1 = _d_w[1];
        _d_w[1] = 0;
        w[1] = _tape.pop<double>();
        _d_w[1] += _r_d1 * 0.5;
        _d_s += _r_d1 * 0.01;
        {
            long _cp_n1 = n > 0 ? n : 0;
            long _cp_k1 = torchclad::checkpoint_every(_cp_n1, 2);
            for (long _cp_s1 = (_cp_n1 + (_cp_k1 - 1)) / _cp_k1 * _cp_k1; (_cp_s1 -= _cp_k1) >= 0; ) {
                s = _tape.pop<double>();
                long _cp_e1 = _cp_s1 + _cp_k1 < _cp_n1 ? _cp_s1 + _cp_k1 : _cp_n1;
                for (int i = static_cast<int>(_cp_s1); i < static_cast<int>(_cp_e1); ++i) {
                    _tape.push(s);
                    s = s * c + std::sin(x[i] * w[1]);
                }
                double _acc0 = double(0);
                for (int i = static_cast<int>(_cp_e1); i-- > static_cast<int>(_cp_s1); ) {
                    double _r_d0 = _d_s;
                    _d_s = 0;
                    s = _tape.pop<double>();
                    _d_s += _r_d0 * c;
                    _d_c += s * _r_d0;
                    _d_x[i] += (_r_d0 * std::cos((x[i] * w[1]))) * w[1];
                    _acc0 += x[i] * (_r_d0 * std::cos((x[i] * w[1])));
                }
                if (_acc0 != double(0)) {
                    _d_w[1] += _acc0;
                }
            }
        }
        _d_w[0] += _d_c;
    }
}

void ckpt_nested_grad(double* w, const double* x, int n, int reps, double* _d_w, double* _d_x) {
    ckpt_nested_pullback(w, x, n, reps, double(1), _d_w, _d_x);
}

double ckpt_nested_reverse_forw(double* w, const double* x, int n, int reps, torchclad::Tape& _tape) {
    double s = 0;
    for (int r = 0; r < reps; ++r) {
        double c = w[0];
        {
            long _cp_n0 = n > 0 ? n : 0;
            long _cp_k0 = torchclad::checkpoint_every(_cp_n0, 2);
            for (long _cp_s0 = 0; _cp_s0 < _cp_n0; _cp_s0 += _cp_k0) {
                _tape.push(s);
                long _cp_e0 = _cp_s0 + _cp_k0 < _cp_n0 ? _cp_s0 + _cp_k0 : _cp_n0;
                for (int i = static_cast<int>(_cp_s0); i < static_cast<int>(_cp_e0); ++i) {
                    s = s * c + std::sin(x[i] * w[1]);
                }
            }
        }
        _tape.push(w[1]);
        w[1] = w[1] * 0.5 + s * 0.01;
        _tape.push(c);
    }
    _tape.push(s);
    return s;
}

void ckpt_nested_reverse_sweep(double* w, const double* x, int n, int reps, double _d_y, double* _d_w, double* _d_x, torchclad::Tape& _tape) {
    double s = _tape.pop<double>();
    double _d_s = double(0);
    _d_s += _d_y;
    for (int r = reps; r-- > 0; ) {
        double c = _tape.pop<double>();
        double _d_c = double(0);
        double _r_d1 = _d_w[1];
        _d_w[1] = 0;
        w[1] = _tape.pop<double>();
        _d_w[1] += _r_d1 * 0.5;
        _d_s += _r_d1 * 0.01;
        {
            long _cp_n0 = n > 0 ? n : 0;
            long _cp_k0 = torchclad::checkpoint_every(_cp_n0, 2);
            for (long _cp_s0 = (_cp_n0 + (_cp_k0 - 1)) / _cp_k0 * _cp_k0; (_cp_s0 -= _cp_k0) >= 0; ) {
                s = _tape.pop<double>();
                long _cp_e0 = _cp_s0 + _cp_k0 < _cp_n0 ? _cp_s0 + _cp_k0 : _cp_n0;
                for (int i = static_cast<int>(_cp_s0); i < static_cast<int>(_cp_e0); ++i) {
                    _tape.push(s);
                    s = s * c + std::sin(x[i] * w[1]);
                }
                double _acc0 = double(0);
                for (int i = static_cast<int>(_cp_e0); i-- > static_cast<int>(_cp_s0); ) {
                    double _r_d0 = _d_s;
                    _d_s = 0;
                    s = _tape.pop<double>();
                    _d_s += _r_d0 * c;
                    _d_c += s * _r_d0;
                    _d_x[i] += (_r_d0 * std::cos((x[i] * w[1]))) * w[1];
                    _acc0 += x[i] * (_r_d0 * std::cos((x[i] * w[1])));
                }
                if (_acc0 != double(0)) {
                    _d_w[1] += _acc0;
                }
            }
        }
        _d_w[0] += _d_c;
    }
}
