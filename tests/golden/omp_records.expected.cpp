void omp_records_pullback(double* out, const double* inp, int B, int C, double* _d_out, double* _d_inp) {
    torchclad::Tape _tape;
    {
        long _t0 = B > 0 ? B : 0;
        torchclad::IterRecords _t1 = torchclad::IterRecords(_t0);
        #pragma omp parallel for
        for (int b = 0; b < B; ++b) {
            torchclad::Tape& _tape = _t1.record(b);
            double p = 1;
            for (int i = 0; i < C - b % 3; ++i) {
                _tape.push(p);
                p = p * (1.0 + inp[b * C + i] * inp[b * C + i]);
            }
            out[b] = p;
            _tape.push(p);
        }
        _t1.save(_tape);
    }
    {
        torchclad::IterRecords _t3 = torchclad::IterRecords::load(_tape);
        #pragma omp parallel for
        for (int b = 0; b < B; ++b) {
            torchclad::Tape& _tape = _t3.replay(b);
            double p = _tape.pop<double>();
            double _d_p = double(0);
            double _r_d1 = _d_out[b];
            _d_out[b] = 0;
            _d_p += _r_d1;
            for (int i = C - b % 3; i-- > 0; ) {
                double _r_d0 = _d_p;
                _d_p = 0;
                p = _tape.pop<double>();
                _d_p += _r_d0 * (1.0 + inp[b * C + i] * inp[b * C + i]);
                _d_inp[b * C + i] += double(2) * (p * _r_d0 * inp[b * C + i]);
            }
        }
    }
}

void omp_records_reverse_forw(double* out, const double* inp, int B, int C, torchclad::Tape& _tape) {
    {
        long _t0 = B > 0 ? B : 0;
        torchclad::IterRecords _t1 = torchclad::IterRecords(_t0);
        #pragma omp parallel for
        for (int b = 0; b < B; ++b) {
            torchclad::Tape& _tape = _t1.record(b);
            double p = 1;
            for (int i = 0; i < C - b % 3; ++i) {
                _tape.push(p);
                p = p * (1.0 + inp[b * C + i] * inp[b * C + i]);
            }
            out[b] = p;
            _tape.push(p);
        }
        _t1.save(_tape);
    }
}

void omp_records_reverse_sweep(double* out, const double* inp, int B, int C, double* _d_out, double* _d_inp, torchclad::Tape& _tape) {
    {
        torchclad::IterRecords _t1 = torchclad::IterRecords::load(_tape);
        #pragma omp parallel for
        for (int b = 0; b < B; ++b) {
            torchclad::Tape& _tape = _t1.replay(b);
            double p = _tape.pop<double>();
            double _d_p = double(0);
            double _r_d1 = _d_out[b];
            _d_out[b] = 0;
            _d_p += _r_d1;
            for (int i = C - b % 3; i-- > 0; ) {
                double _r_d0 = _d_p;
                _d_p = 0;
                p = _tape.pop<double>();
                _d_p += _r_d0 * (1.0 + inp[b * C + i] * inp[b * C + i]);
                _d_inp[b * C + i] += double(2) * (p * _r_d0 * inp[b * C + i]);
            }
        }
    }
}

void omp_records_reverse_sweep_assign(double* out, const double* inp, int B, int C, double* _d_out, double* _d_inp, torchclad::Tape& _tape) {
    {
        torchclad::IterRecords _t1 = torchclad::IterRecords::load(_tape);
        #pragma omp parallel for
        for (int b = 0; b < B; ++b) {
            torchclad::Tape& _tape = _t1.replay(b);
            for (long _t2 = 0; _t2 < (long)C; ++_t2) {
                _d_inp[(long)C * (long)b + _t2] = 0;
            }
            double p = _tape.pop<double>();
            double _d_p = double(0);
            double _r_d1 = _d_out[b];
            _d_p += _r_d1;
            for (int i = C - b % 3; i-- > 0; ) {
                double _r_d0 = _d_p;
                _d_p = 0;
                p = _tape.pop<double>();
                _d_p += _r_d0 * (1.0 + inp[b * C + i] * inp[b * C + i]);
                _d_inp[b * C + i] += double(2) * (p * _r_d0 * inp[b * C + i]);
            }
        }
    }
}
