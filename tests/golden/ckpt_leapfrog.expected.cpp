void ckpt_leapfrog_pullback(double* q, double* p, const double* k, int n, int steps, double h, double* _d_q, double* _d_p, double* _d_k, double* _d_h) {
    torchclad::Tape _tape;
    {
        long _cp_n0 = steps > 0 ? steps : 0;
        long _cp_k0 = torchclad::checkpoint_every(_cp_n0, 4);
        for (long _cp_s0 = 0; _cp_s0 < _cp_n0; _cp_s0 += _cp_k0) {
            _tape.push_array(q + 0, static_cast<std::size_t>(n));
            _tape.push_array(p + 0, static_cast<std::size_t>(n));
            long _cp_e0 = _cp_s0 + _cp_k0 < _cp_n0 ? _cp_s0 + _cp_k0 : _cp_n0;
            for (int s = static_cast<int>(_cp_s0); s < static_cast<int>(_cp_e0); ++s) {
                for (int j = 0; j < n; ++j) {
                    p[j] -= 0.5 * h * k[j] * std::sin(q[j]);
                }
                for (int j = 0; j < n; ++j) {
                    q[j] += h * p[j];
                }
                for (int j = 0; j < n; ++j) {
                    p[j] -= 0.5 * h * k[j] * std::sin(q[j]);
                }
            }
        }
    }
    {
        long _cp_n1 = steps > 0 ? steps : 0;
        long _cp_k1 = torchclad::checkpoint_every(_cp_n1, 4);
        for (long _cp_s1 = (_cp_n1 + (_cp_k1 - 1)) / _cp_k1 * _cp_k1; (_cp_s1 -= _cp_k1) >= 0; ) {
            _tape.pop_array(p + 0, static_cast<std::size_t>(n));
            _tape.pop_array(q + 0, static_cast<std::size_t>(n));
            long _cp_e1 = _cp_s1 + _cp_k1 < _cp_n1 ? _cp_s1 + _cp_k1 : _cp_n1;
            for (int s = static_cast<int>(_cp_s1); s < static_cast<int>(_cp_e1); ++s) {
                for (int j = 0; j < n; ++j) {
                    _tape.push(p[j]);
                    p[j] -= 0.5 * h * k[j] * std::sin(q[j]);
                }
                for (int j = 0; j < n; ++j) {
                    _tape.push(q[j]);
                    q[j] += h * p[j];
                }
                for (int j = 0; j < n; ++j) {
                    _tape.push(p[j]);
                    p[j] -= 0.5 * h * k[j] * std::sin(q[j]);
                }
            }
            for (int s = static_cast<int>(_cp_e1); s-- > static_cast<int>(_cp_s1); ) {
                double _acc0 = double(0);
                for (int j = n; j-- > 0; ) {
                    p[j] = _tape.pop<double>();
                    const double _cse0 = std::sin(q[j]);
                    _acc0 += 0.5 * (-_d_p[j] * _cse0 * k[j]);
                    _d_k[j] += 0.5 * h * (-_d_p[j] * _cse0);
                    _d_q[j] += (0.5 * h * k[j] * -_d_p[j]) * std::cos(q[j]);
                }
                if (_acc0 != double(0)) {
                    *_d_h += _acc0;
                }
                double _acc1 = double(0);
                for (int j = n; j-- > 0; ) {
                    q[j] = _tape.pop<double>();
                    _acc1 += _d_q[j] * p[j];
                    _d_p[j] += h * _d_q[j];
                }
                if (_acc1 != double(0)) {
                    *_d_h += _acc1;
                }
                double _acc2 = double(0);
                for (int j = n; j-- > 0; ) {
                    p[j] = _tape.pop<double>();
                    const double _cse1 = std::sin(q[j]);
                    _acc2 += 0.5 * (-_d_p[j] * _cse1 * k[j]);
                    _d_k[j] += 0.5 * h * (-_d_p[j] * _cse1);
                    _d_q[j] += (0.5 * h * k[j] * -_d_p[j]) * std::cos(q[j]);
                }
                if (_acc2 != double(0)) {
                    *_d_h += _acc2;
                }
            }
        }
    }
}

void ckpt_leapfrog_reverse_forw(double* q, double* p, const double* k, int n, int steps, double h, torchclad::Tape& _tape) {
    {
        long _cp_n0 = steps > 0 ? steps : 0;
        long _cp_k0 = torchclad::checkpoint_every(_cp_n0, 4);
        for (long _cp_s0 = 0; _cp_s0 < _cp_n0; _cp_s0 += _cp_k0) {
            _tape.push_array(q + 0, static_cast<std::size_t>(n));
            _tape.push_array(p + 0, static_cast<std::size_t>(n));
            long _cp_e0 = _cp_s0 + _cp_k0 < _cp_n0 ? _cp_s0 + _cp_k0 : _cp_n0;
            for (int s = static_cast<int>(_cp_s0); s < static_cast<int>(_cp_e0); ++s) {
                for (int j = 0; j < n; ++j) {
                    p[j] -= 0.5 * h * k[j] * std::sin(q[j]);
                }
                for (int j = 0; j < n; ++j) {
                    q[j] += h * p[j];
                }
                for (int j = 0; j < n; ++j) {
                    p[j] -= 0.5 * h * k[j] * std::sin(q[j]);
                }
            }
        }
    }
}

void ckpt_leapfrog_reverse_sweep(double* q, double* p, const double* k, int n, int steps, double h, double* _d_q, double* _d_p, double* _d_k, double* _d_h, torchclad::Tape& _tape) {
    {
        long _cp_n0 = steps > 0 ? steps : 0;
        long _cp_k0 = torchclad::checkpoint_every(_cp_n0, 4);
        for (long _cp_s0 = (_cp_n0 + (_cp_k0 - 1)) / _cp_k0 * _cp_k0; (_cp_s0 -= _cp_k0) >= 0; ) {
            _tape.pop_array(p + 0, static_cast<std::size_t>(n));
            _tape.pop_array(q + 0, static_cast<std::size_t>(n));
            long _cp_e0 = _cp_s0 + _cp_k0 < _cp_n0 ? _cp_s0 + _cp_k0 : _cp_n0;
            for (int s = static_cast<int>(_cp_s0); s < static_cast<int>(_cp_e0); ++s) {
                for (int j = 0; j < n; ++j) {
                    _tape.push(p[j]);
                    p[j] -= 0.5 * h * k[j] * std::sin(q[j]);
                }
                for (int j = 0; j < n; ++j) {
                    _tape.push(q[j]);
                    q[j] += h * p[j];
                }
                for (int j = 0; j < n; ++j) {
                    _tape.push(p[j]);
                    p[j] -= 0.5 * h * k[j] * std::sin(q[j]);
                }
            }
            for (int s = static_cast<int>(_cp_e0); s-- > static_cast<int>(_cp_s0); ) {
                double _acc0 = double(0);
                for (int j = n; j-- > 0; ) {
                    p[j] = _tape.pop<double>();
                    const double _cse0 = std::sin(q[j]);
                    _acc0 += 0.5 * (-_d_p[j] * _cse0 * k[j]);
                    _d_k[j] += 0.5 * h * (-_d_p[j] * _cse0);
                    _d_q[j] += (0.5 * h * k[j] * -_d_p[j]) * std::cos(q[j]);
                }
                if (_acc0 != double(0)) {
                    *_d_h += _acc0;
                }
                double _acc1 = double(0);
                for (int j = n; j-- > 0; ) {
                    q[j] = _tape.pop<double>();
                    _acc1 += _d_q[j] * p[j];
                    _d_p[j] += h * _d_q[j];
                }
                if (_acc1 != double(0)) {
                    *_d_h += _acc1;
                }
                double _acc2 = double(0);
                for (int j = n; j-- > 0; ) {
                    p[j] = _tape.pop<double>();
                    const double _cse1 = std::sin(q[j]);
                    _acc2 += 0.5 * (-_d_p[j] * _cse1 * k[j]);
                    _d_k[j] += 0.5 * h * (-_d_p[j] * _cse1);
                    _d_q[j] += (0.5 * h * k[j] * -_d_p[j]) * std::cos(q[j]);
                }
                if (_acc2 != double(0)) {
                    *_d_h += _acc2;
                }
            }
        }
    }
}
