void omp_collapse3_pullback(double* out, const double* inp, int B, int T, int C, int H, double* _d_out, double* _d_inp) {
    torchclad::Tape _tape;
    int D = C / H;
    {
        long _t0 = B > 0 ? B : 0;
        long _t1 = T > 0 ? T : 0;
        long _t2 = H > 0 ? H : 0;
        long _t3 = _t0 * _t1 * _t2;
        torchclad::IterRecords _t4 = torchclad::IterRecords(_t3);
        #pragma omp parallel for collapse(3)
        for (int b = 0; b < B; ++b) {
            for (int t = 0; t < T; ++t) {
                for (int h = 0; h < H; ++h) {
                    torchclad::Tape& _tape = _t4.record(((b * _t1 + t) * _t2 + h));
                    const double* q = inp + (b * T + t) * 2 * C + h * D;
                    double acc = 0;
                    for (int s = 0; s <= t; ++s) {
                        const double* k = inp + (b * T + s) * 2 * C + C + h * D;
                        double dot = 0;
                        for (int i = 0; i < D; ++i) {
                            dot += q[i] * k[i];
                        }
                        acc += dot * dot;
                        _tape.push(dot);
                    }
                    out[(b * T + t) * H + h] = acc;
                }
            }
        }
        _t4.save(_tape);
    }
    {
        long _t6 = T > 0 ? T : 0;
        long _t7 = H > 0 ? H : 0;
        torchclad::IterRecords _t9 = torchclad::IterRecords::load(_tape);
        #pragma omp parallel for if(C >= 0 && H >= 1)
        for (int b = 0; b < B; ++b) {
            for (int t = 0; t < T; ++t) {
                for (int h = 0; h < H; ++h) {
                    torchclad::Tape& _tape = _t9.replay(((b * _t6 + t) * _t7 + h));
                    const double* q = inp + (b * T + t) * 2 * C + h * D;
                    double _d_acc = double(0);
                    double _r_d0 = _d_out[(b * T + t) * H + h];
                    _d_out[(b * T + t) * H + h] = 0;
                    _d_acc += _r_d0;
                    for (int s = t + 1; s-- > 0; ) {
                        double dot = _tape.pop<double>();
                        const double* k = inp + (b * T + s) * 2 * C + C + h * D;
                        double _d_dot = double(0);
                        _d_dot += double(2) * (_d_acc * dot);
                        for (int i = 0; i < D; ++i) {
                            _d_inp[q - inp + i] += _d_dot * k[i];
                            _d_inp[k - inp + i] += q[i] * _d_dot;
                        }
                    }
                }
            }
        }
    }
}

void omp_collapse3_reverse_forw(double* out, const double* inp, int B, int T, int C, int H, torchclad::Tape& _tape) {
    int D = C / H;
    {
        long _t0 = B > 0 ? B : 0;
        long _t1 = T > 0 ? T : 0;
        long _t2 = H > 0 ? H : 0;
        long _t3 = _t0 * _t1 * _t2;
        torchclad::IterRecords _t4 = torchclad::IterRecords(_t3);
        #pragma omp parallel for collapse(3)
        for (int b = 0; b < B; ++b) {
            for (int t = 0; t < T; ++t) {
                for (int h = 0; h < H; ++h) {
                    torchclad::Tape& _tape = _t4.record(((b * _t1 + t) * _t2 + h));
                    const double* q = inp + (b * T + t) * 2 * C + h * D;
                    double acc = 0;
                    for (int s = 0; s <= t; ++s) {
                        const double* k = inp + (b * T + s) * 2 * C + C + h * D;
                        double dot = 0;
                        for (int i = 0; i < D; ++i) {
                            dot += q[i] * k[i];
                        }
                        acc += dot * dot;
                        _tape.push(dot);
                    }
                    out[(b * T + t) * H + h] = acc;
                }
            }
        }
        _t4.save(_tape);
    }
}

void omp_collapse3_reverse_sweep(double* out, const double* inp, int B, int T, int C, int H, double* _d_out, double* _d_inp, torchclad::Tape& _tape) {
    int D = C / H;
    {
        long _t1 = T > 0 ? T : 0;
        long _t2 = H > 0 ? H : 0;
        torchclad::IterRecords _t4 = torchclad::IterRecords::load(_tape);
        #pragma omp parallel for if(C >= 0 && H >= 1)
        for (int b = 0; b < B; ++b) {
            for (int t = 0; t < T; ++t) {
                for (int h = 0; h < H; ++h) {
                    torchclad::Tape& _tape = _t4.replay(((b * _t1 + t) * _t2 + h));
                    const double* q = inp + (b * T + t) * 2 * C + h * D;
                    double _d_acc = double(0);
                    double _r_d0 = _d_out[(b * T + t) * H + h];
                    _d_out[(b * T + t) * H + h] = 0;
                    _d_acc += _r_d0;
                    for (int s = t + 1; s-- > 0; ) {
                        double dot = _tape.pop<double>();
                        const double* k = inp + (b * T + s) * 2 * C + C + h * D;
                        double _d_dot = double(0);
                        _d_dot += double(2) * (_d_acc * dot);
                        for (int i = 0; i < D; ++i) {
                            _d_inp[q - inp + i] += _d_dot * k[i];
                            _d_inp[k - inp + i] += q[i] * _d_dot;
                        }
                    }
                }
            }
        }
    }
}

void omp_collapse3_reverse_sweep_assign(double* out, const double* inp, int B, int T, int C, int H, double* _d_out, double* _d_inp, torchclad::Tape& _tape) {
    int D = C / H;
    {
        long _t1 = T > 0 ? T : 0;
        long _t2 = H > 0 ? H : 0;
        torchclad::IterRecords _t4 = torchclad::IterRecords::load(_tape);
        #pragma omp parallel for if(C >= 0 && H >= 1)
        for (int b = 0; b < B; ++b) {
            for (int t = 0; t < T; ++t) {
                for (int h = 0; h < H; ++h) {
                    torchclad::Tape& _tape = _t4.replay(((b * _t1 + t) * _t2 + h));
                    const double* q = inp + (b * T + t) * 2 * C + h * D;
                    double _d_acc = double(0);
                    double _r_d0 = _d_out[(b * T + t) * H + h];
                    _d_acc += _r_d0;
                    for (int s = t + 1; s-- > 0; ) {
                        double dot = _tape.pop<double>();
                        const double* k = inp + (b * T + s) * 2 * C + C + h * D;
                        double _d_dot = double(0);
                        _d_dot += double(2) * (_d_acc * dot);
                        for (int i = 0; i < D; ++i) {
                            _d_inp[q - inp + i] += _d_dot * k[i];
                            _d_inp[k - inp + i] += q[i] * _d_dot;
                        }
                    }
                }
            }
        }
    }
}
