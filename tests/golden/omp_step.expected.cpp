void omp_step_pullback(double* out, const double* inp, const double* w, int N, int C, int OC, double* _d_out, double* _d_inp, double* _d_w) {
    torchclad::Tape _tape;
    {
        long _t0 = N > 0 ? (N + 3) / 4 : 0;
        torchclad::IterRecords _t1 = torchclad::IterRecords(_t0);
        #pragma omp parallel for
        for (int r = 0; r < N; r += 4) {
            torchclad::Tape& _tape = _t1.record((r / 4));
            for (int o = 0; o < OC; ++o) {
                for (int k = 0; k < 4; ++k) {
                    double s = 0;
                    for (int i = 0; i < C; ++i) {
                        s += inp[(r + k) * C + i] * w[o * C + i];
                    }
                    out[(r + k) * OC + o] = s * s;
                    _tape.push(s);
                }
            }
        }
        _t1.save(_tape);
    }
    {
        long _t2 = N > 0 ? (N + 3) / 4 : 0;
        torchclad::IterRecords _t3 = torchclad::IterRecords::load(_tape);
        bool _t4 = C >= 0 && OC >= 0;
        long _t5 = (long)C * (long)OC;
        long _t6 = _t4 ? torchclad::par_chunks(_t2, _t5, (long)(OC > 0 ? OC : 0) * ((long)(4 > 0 ? 4 : 0) * (long)(C > 0 ? C : 0))) : 1;
        bool _t7 = _t6 > 1;
        double* _t10 = _d_w;
        std::vector<double> _t9(_t7 ? _t6 * _t5 : 0);
        #pragma omp parallel for if(_t7)
        for (long _t8 = 0; _t8 < _t6; ++_t8) {
            double* _d_w = _t7 ? (_t9.data()) + _t8 * _t5 : _t10;
            for (long _t11 = torchclad::par_begin(_t8, _t2, _t6); _t11 < torchclad::par_begin(_t8 + 1, _t2, _t6); ++_t11) {
                int r = static_cast<int>(_t11 * 4);
                torchclad::Tape& _tape = _t3.replay((r / 4));
                for (int o = OC; o-- > 0; ) {
                    for (int k = 4; k-- > 0; ) {
                        double s = _tape.pop<double>();
                        double _d_s = double(0);
                        double _r_d0 = _d_out[(r + k) * OC + o];
                        _d_out[(r + k) * OC + o] = 0;
                        _d_s += double(2) * (_r_d0 * s);
                        for (int i = 0; i < C; ++i) {
                            _d_inp[(r + k) * C + i] += _d_s * w[o * C + i];
                            _d_w[o * C + i] += inp[(r + k) * C + i] * _d_s;
                        }
                    }
                }
            }
        }
        if (_t7) {
            torchclad::par_combine(_t10, _t9.data(), _t6, _t5);
        }
    }
}

void omp_step_reverse_forw(double* out, const double* inp, const double* w, int N, int C, int OC, torchclad::Tape& _tape) {
    {
        long _t0 = N > 0 ? (N + 3) / 4 : 0;
        torchclad::IterRecords _t1 = torchclad::IterRecords(_t0);
        #pragma omp parallel for
        for (int r = 0; r < N; r += 4) {
            torchclad::Tape& _tape = _t1.record((r / 4));
            for (int o = 0; o < OC; ++o) {
                for (int k = 0; k < 4; ++k) {
                    double s = 0;
                    for (int i = 0; i < C; ++i) {
                        s += inp[(r + k) * C + i] * w[o * C + i];
                    }
                    out[(r + k) * OC + o] = s * s;
                    _tape.push(s);
                }
            }
        }
        _t1.save(_tape);
    }
}

void omp_step_reverse_sweep(double* out, const double* inp, const double* w, int N, int C, int OC, double* _d_out, double* _d_inp, double* _d_w, torchclad::Tape& _tape) {
    {
        long _t0 = N > 0 ? (N + 3) / 4 : 0;
        torchclad::IterRecords _t1 = torchclad::IterRecords::load(_tape);
        bool _t2 = C >= 0 && OC >= 0;
        long _t3 = (long)C * (long)OC;
        long _t4 = _t2 ? torchclad::par_chunks(_t0, _t3, (long)(OC > 0 ? OC : 0) * ((long)(4 > 0 ? 4 : 0) * (long)(C > 0 ? C : 0))) : 1;
        bool _t5 = _t4 > 1;
        double* _t8 = _d_w;
        std::vector<double> _t7(_t5 ? _t4 * _t3 : 0);
        #pragma omp parallel for if(_t5)
        for (long _t6 = 0; _t6 < _t4; ++_t6) {
            double* _d_w = _t5 ? (_t7.data()) + _t6 * _t3 : _t8;
            for (long _t9 = torchclad::par_begin(_t6, _t0, _t4); _t9 < torchclad::par_begin(_t6 + 1, _t0, _t4); ++_t9) {
                int r = static_cast<int>(_t9 * 4);
                torchclad::Tape& _tape = _t1.replay((r / 4));
                for (int o = OC; o-- > 0; ) {
                    for (int k = 4; k-- > 0; ) {
                        double s = _tape.pop<double>();
                        double _d_s = double(0);
                        double _r_d0 = _d_out[(r + k) * OC + o];
                        _d_out[(r + k) * OC + o] = 0;
                        _d_s += double(2) * (_r_d0 * s);
                        for (int i = 0; i < C; ++i) {
                            _d_inp[(r + k) * C + i] += _d_s * w[o * C + i];
                            _d_w[o * C + i] += inp[(r + k) * C + i] * _d_s;
                        }
                    }
                }
            }
        }
        if (_t5) {
            torchclad::par_combine(_t8, _t7.data(), _t4, _t3);
        }
    }
}
