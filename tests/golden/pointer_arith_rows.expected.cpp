void pointer_arith_rows_pullback(double* out, const double* inp, const double* scale, int B, int T, int C, double* _d_out, double* _d_inp, double* _d_scale) {
    torchclad::Tape _tape;
    for (int b = 0; b < B; ++b) {
        for (int t = 0; t < T; ++t) {
            const double* x = inp + b * T * C + t * C;
            double* o = out + b * T * C + t * C;
            double ss = 0.0;
            for (int i = 0; i < C; ++i) {
                ss += x[i] * x[i];
            }
            for (int i = 0; i < C; ++i) {
                o[i] = x[i] * scale[i] / (1.0 + ss);
            }
            _tape.push(ss);
        }
    }
    for (int b = B; b-- > 0; ) {
        for (int t = T; t-- > 0; ) {
            double ss = _tape.pop<double>();
            const double* x = inp + b * T * C + t * C;
            double* o = out + b * T * C + t * C;
            double _d_ss = double(0);
            {
                double _lane0[16] = {};
                int _ib0 = 0;
                for (; _ib0 + 16 <= C; _ib0 += 16) {
                    #pragma omp simd
                    for (int _j0 = 0; _j0 < 16; ++_j0) {
                        int i = _ib0 + _j0;
                        double _r_d0 = _d_out[o - out + i];
                        _d_out[o - out + i] = 0;
                        _d_inp[x - inp + i] += _r_d0 / (1.0 + ss) * scale[i];
                        _d_scale[i] += x[i] * (_r_d0 / (1.0 + ss));
                        _lane0[_j0] += -_r_d0 * (x[i] * scale[i]) / ((1.0 + ss) * (1.0 + ss));
                    }
                }
                for (int i = _ib0; i < C; ++i) {
                    double _r_d0 = _d_out[o - out + i];
                    _d_out[o - out + i] = 0;
                    _d_inp[x - inp + i] += _r_d0 / (1.0 + ss) * scale[i];
                    _d_scale[i] += x[i] * (_r_d0 / (1.0 + ss));
                    _d_ss += -_r_d0 * (x[i] * scale[i]) / ((1.0 + ss) * (1.0 + ss));
                }
                for (int _j0 = 0; _j0 < 16; ++_j0) {
                    _d_ss += _lane0[_j0];
                }
            }
            for (int i = 0; i < C; ++i) {
                _d_inp[x - inp + i] += double(2) * (_d_ss * x[i]);
            }
        }
    }
}

void pointer_arith_rows_reverse_forw(double* out, const double* inp, const double* scale, int B, int T, int C, torchclad::Tape& _tape) {
    for (int b = 0; b < B; ++b) {
        for (int t = 0; t < T; ++t) {
            const double* x = inp + b * T * C + t * C;
            double* o = out + b * T * C + t * C;
            double ss = 0.0;
            for (int i = 0; i < C; ++i) {
                ss += x[i] * x[i];
            }
            for (int i = 0; i < C; ++i) {
                o[i] = x[i] * scale[i] / (1.0 + ss);
            }
            _tape.push(ss);
        }
    }
}

void pointer_arith_rows_reverse_sweep(double* out, const double* inp, const double* scale, int B, int T, int C, double* _d_out, double* _d_inp, double* _d_scale, torchclad::Tape& _tape) {
    for (int b = B; b-- > 0; ) {
        for (int t = T; t-- > 0; ) {
            double ss = _tape.pop<double>();
            const double* x = inp + b * T * C + t * C;
            double* o = out + b * T * C + t * C;
            double _d_ss = double(0);
            {
                double _lane0[16] = {};
                int _ib0 = 0;
                for (; _ib0 + 16 <= C; _ib0 += 16) {
                    #pragma omp simd
                    for (int _j0 = 0; _j0 < 16; ++_j0) {
                        int i = _ib0 + _j0;
                        double _r_d0 = _d_out[o - out + i];
                        _d_out[o - out + i] = 0;
                        _d_inp[x - inp + i] += _r_d0 / (1.0 + ss) * scale[i];
                        _d_scale[i] += x[i] * (_r_d0 / (1.0 + ss));
                        _lane0[_j0] += -_r_d0 * (x[i] * scale[i]) / ((1.0 + ss) * (1.0 + ss));
                    }
                }
                for (int i = _ib0; i < C; ++i) {
                    double _r_d0 = _d_out[o - out + i];
                    _d_out[o - out + i] = 0;
                    _d_inp[x - inp + i] += _r_d0 / (1.0 + ss) * scale[i];
                    _d_scale[i] += x[i] * (_r_d0 / (1.0 + ss));
                    _d_ss += -_r_d0 * (x[i] * scale[i]) / ((1.0 + ss) * (1.0 + ss));
                }
                for (int _j0 = 0; _j0 < 16; ++_j0) {
                    _d_ss += _lane0[_j0];
                }
            }
            for (int i = 0; i < C; ++i) {
                _d_inp[x - inp + i] += double(2) * (_d_ss * x[i]);
            }
        }
    }
}

void pointer_arith_rows_reverse_sweep_assign(double* out, const double* inp, const double* scale, int B, int T, int C, double* _d_out, double* _d_inp, double* _d_scale, torchclad::Tape& _tape) {
    for (int b = B; b-- > 0; ) {
        for (int t = T; t-- > 0; ) {
            double ss = _tape.pop<double>();
            const double* x = inp + b * T * C + t * C;
            double* o = out + b * T * C + t * C;
            double _d_ss = double(0);
            {
                double _lane0[16] = {};
                int _ib0 = 0;
                for (; _ib0 + 16 <= C; _ib0 += 16) {
                    #pragma omp simd
                    for (int _j0 = 0; _j0 < 16; ++_j0) {
                        int i = _ib0 + _j0;
                        double _r_d0 = _d_out[o - out + i];
                        _d_inp[x - inp + i] += _r_d0 / (1.0 + ss) * scale[i];
                        _d_scale[i] += x[i] * (_r_d0 / (1.0 + ss));
                        _lane0[_j0] += -_r_d0 * (x[i] * scale[i]) / ((1.0 + ss) * (1.0 + ss));
                    }
                }
                for (int i = _ib0; i < C; ++i) {
                    double _r_d0 = _d_out[o - out + i];
                    _d_inp[x - inp + i] += _r_d0 / (1.0 + ss) * scale[i];
                    _d_scale[i] += x[i] * (_r_d0 / (1.0 + ss));
                    _d_ss += -_r_d0 * (x[i] * scale[i]) / ((1.0 + ss) * (1.0 + ss));
                }
                for (int _j0 = 0; _j0 < 16; ++_j0) {
                    _d_ss += _lane0[_j0];
                }
            }
            for (int i = 0; i < C; ++i) {
                _d_inp[x - inp + i] += double(2) * (_d_ss * x[i]);
            }
        }
    }
}
