void omp_rows_shared_pullback(double* out, const double* inp, const double* w, const double* bias, int B, int C, double* _d_out, double* _d_inp, double* _d_w, double* _d_bias) {
    torchclad::Tape _tape;
    {
        long _t1 = B > 0 ? B : 0;
        std::vector<double> _t0(_t1);
        #pragma omp parallel for
        for (int b = 0; b < B; ++b) {
            const double* x = inp + b * C;
            double m = 0;
            for (int i = 0; i < C; ++i) {
                m += x[i] * w[i];
            }
            if (bias != nullptr) {
                for (int i = 0; i < C; ++i) {
                    out[b * C + i] = x[i] * m + bias[i];
                }
            } else {
                for (int i = 0; i < C; ++i) {
                    out[b * C + i] = x[i] * m + 0.0;
                }
            }
            _t0[b] = m;
        }
        _tape.push_array(_t0.data(), _t1);
    }
    {
        long _t3 = B > 0 ? B : 0;
        std::vector<double> _t2(_t3);
        _tape.pop_array(_t2.data(), _t3);
        bool _t4 = C >= 0;
        long _t5 = (long)C;
        long _t6 = (long)C;
        long _t7 = _t4 ? torchclad::par_chunks(_t3, _t5 + _t6, (long)(C > 0 ? C : 0) + (long)(C > 0 ? C : 0)) : 1;
        bool _t8 = _t7 > 1;
        double* _t11 = _d_bias;
        std::vector<double> _t10(_t8 ? _t7 * _t5 : 0);
        double* _t13 = _d_w;
        std::vector<double> _t12(_t8 ? _t7 * _t6 : 0);
        #pragma omp parallel for if(_t8)
        for (long _t9 = 0; _t9 < _t7; ++_t9) {
            double* _d_bias = _t8 ? (_t10.data()) + _t9 * _t5 : _t11;
            double* _d_w = _t8 ? (_t12.data()) + _t9 * _t6 : _t13;
            for (long _t14 = torchclad::par_begin(_t9, _t3, _t7); _t14 < torchclad::par_begin(_t9 + 1, _t3, _t7); ++_t14) {
                int b = static_cast<int>(_t14);
                double m = static_cast<double>(_t2[b]);
                const double* x = inp + b * C;
                double _d_m = double(0);
                if (bias != nullptr) {
                    {
                        double _lane0[16] = {};
                        int _ib0 = 0;
                        for (; _ib0 + 16 <= C; _ib0 += 16) {
                            #pragma omp simd
                            for (int _j0 = 0; _j0 < 16; ++_j0) {
                                int i = _ib0 + _j0;
                                double _r_d0 = _d_out[b * C + i];
                                _d_out[b * C + i] = 0;
                                _d_inp[x - inp + i] += _r_d0 * m;
                                _lane0[_j0] += x[i] * _r_d0;
                                _d_bias[i] += _r_d0;
                            }
                        }
                        for (int i = _ib0; i < C; ++i) {
                            double _r_d0 = _d_out[b * C + i];
                            _d_out[b * C + i] = 0;
                            _d_inp[x - inp + i] += _r_d0 * m;
                            _d_m += x[i] * _r_d0;
                            _d_bias[i] += _r_d0;
                        }
                        for (int _j0 = 0; _j0 < 16; ++_j0) {
                            _d_m += _lane0[_j0];
                        }
                    }
                } else {
                    {
                        double _lane1[16] = {};
                        int _ib1 = 0;
                        for (; _ib1 + 16 <= C; _ib1 += 16) {
                            #pragma omp simd
                            for (int _j1 = 0; _j1 < 16; ++_j1) {
                                int i = _ib1 + _j1;
                                double _r_d0 = _d_out[b * C + i];
                                _d_out[b * C + i] = 0;
                                _d_inp[x - inp + i] += _r_d0 * m;
                                _lane1[_j1] += x[i] * _r_d0;
                            }
                        }
                        for (int i = _ib1; i < C; ++i) {
                            double _r_d0 = _d_out[b * C + i];
                            _d_out[b * C + i] = 0;
                            _d_inp[x - inp + i] += _r_d0 * m;
                            _d_m += x[i] * _r_d0;
                        }
                        for (int _j1 = 0; _j1 < 16; ++_j1) {
                            _d_m += _lane1[_j1];
                        }
                    }
                }
                for (int i = 0; i < C; ++i) {
                    _d_inp[x - inp + i] += _d_m * w[i];
                    _d_w[i] += x[i] * _d_m;
                }
            }
        }
        if (_t8) {
            torchclad::par_combine(_t11, _t10.data(), _t7, _t5);
        }
        if (_t8) {
            torchclad::par_combine(_t13, _t12.data(), _t7, _t6);
        }
    }
}

void omp_rows_shared_reverse_forw(double* out, const double* inp, const double* w, const double* bias, int B, int C, torchclad::Tape& _tape) {
    {
        long _t1 = B > 0 ? B : 0;
        std::vector<double> _t0(_t1);
        #pragma omp parallel for
        for (int b = 0; b < B; ++b) {
            const double* x = inp + b * C;
            double m = 0;
            for (int i = 0; i < C; ++i) {
                m += x[i] * w[i];
            }
            if (bias != nullptr) {
                for (int i = 0; i < C; ++i) {
                    out[b * C + i] = x[i] * m + bias[i];
                }
            } else {
                for (int i = 0; i < C; ++i) {
                    out[b * C + i] = x[i] * m + 0.0;
                }
            }
            _t0[b] = m;
        }
        _tape.push_array(_t0.data(), _t1);
    }
}

void omp_rows_shared_reverse_sweep(double* out, const double* inp, const double* w, const double* bias, int B, int C, double* _d_out, double* _d_inp, double* _d_w, double* _d_bias, torchclad::Tape& _tape) {
    {
        long _t1 = B > 0 ? B : 0;
        std::vector<double> _t0(_t1);
        _tape.pop_array(_t0.data(), _t1);
        bool _t2 = C >= 0;
        long _t3 = (long)C;
        long _t4 = (long)C;
        long _t5 = _t2 ? torchclad::par_chunks(_t1, _t3 + _t4, (long)(C > 0 ? C : 0) + (long)(C > 0 ? C : 0)) : 1;
        bool _t6 = _t5 > 1;
        double* _t9 = _d_bias;
        std::vector<double> _t8(_t6 ? _t5 * _t3 : 0);
        double* _t11 = _d_w;
        std::vector<double> _t10(_t6 ? _t5 * _t4 : 0);
        #pragma omp parallel for if(_t6)
        for (long _t7 = 0; _t7 < _t5; ++_t7) {
            double* _d_bias = _t6 ? (_t8.data()) + _t7 * _t3 : _t9;
            double* _d_w = _t6 ? (_t10.data()) + _t7 * _t4 : _t11;
            for (long _t12 = torchclad::par_begin(_t7, _t1, _t5); _t12 < torchclad::par_begin(_t7 + 1, _t1, _t5); ++_t12) {
                int b = static_cast<int>(_t12);
                double m = static_cast<double>(_t0[b]);
                const double* x = inp + b * C;
                double _d_m = double(0);
                if (bias != nullptr) {
                    {
                        double _lane0[16] = {};
                        int _ib0 = 0;
                        for (; _ib0 + 16 <= C; _ib0 += 16) {
                            #pragma omp simd
                            for (int _j0 = 0; _j0 < 16; ++_j0) {
                                int i = _ib0 + _j0;
                                double _r_d0 = _d_out[b * C + i];
                                _d_out[b * C + i] = 0;
                                _d_inp[x - inp + i] += _r_d0 * m;
                                _lane0[_j0] += x[i] * _r_d0;
                                _d_bias[i] += _r_d0;
                            }
                        }
                        for (int i = _ib0; i < C; ++i) {
                            double _r_d0 = _d_out[b * C + i];
                            _d_out[b * C + i] = 0;
                            _d_inp[x - inp + i] += _r_d0 * m;
                            _d_m += x[i] * _r_d0;
                            _d_bias[i] += _r_d0;
                        }
                        for (int _j0 = 0; _j0 < 16; ++_j0) {
                            _d_m += _lane0[_j0];
                        }
                    }
                } else {
                    {
                        double _lane1[16] = {};
                        int _ib1 = 0;
                        for (; _ib1 + 16 <= C; _ib1 += 16) {
                            #pragma omp simd
                            for (int _j1 = 0; _j1 < 16; ++_j1) {
                                int i = _ib1 + _j1;
                                double _r_d0 = _d_out[b * C + i];
                                _d_out[b * C + i] = 0;
                                _d_inp[x - inp + i] += _r_d0 * m;
                                _lane1[_j1] += x[i] * _r_d0;
                            }
                        }
                        for (int i = _ib1; i < C; ++i) {
                            double _r_d0 = _d_out[b * C + i];
                            _d_out[b * C + i] = 0;
                            _d_inp[x - inp + i] += _r_d0 * m;
                            _d_m += x[i] * _r_d0;
                        }
                        for (int _j1 = 0; _j1 < 16; ++_j1) {
                            _d_m += _lane1[_j1];
                        }
                    }
                }
                for (int i = 0; i < C; ++i) {
                    _d_inp[x - inp + i] += _d_m * w[i];
                    _d_w[i] += x[i] * _d_m;
                }
            }
        }
        if (_t6) {
            torchclad::par_combine(_t9, _t8.data(), _t5, _t3);
        }
        if (_t6) {
            torchclad::par_combine(_t11, _t10.data(), _t5, _t4);
        }
    }
}

void omp_rows_shared_reverse_sweep_assign(double* out, const double* inp, const double* w, const double* bias, int B, int C, double* _d_out, double* _d_inp, double* _d_w, double* _d_bias, torchclad::Tape& _tape) {
    {
        long _t1 = B > 0 ? B : 0;
        std::vector<double> _t0(_t1);
        _tape.pop_array(_t0.data(), _t1);
        bool _t3 = C >= 0;
        long _t4 = (long)C;
        long _t5 = (long)C;
        long _t6 = _t3 ? torchclad::par_chunks(_t1, _t4 + _t5, (long)(C > 0 ? C : 0) + (long)(C > 0 ? C : 0)) : 1;
        bool _t7 = _t6 > 1;
        double* _t10 = _d_bias;
        std::vector<double> _t9(_t7 ? _t6 * _t4 : 0);
        double* _t12 = _d_w;
        std::vector<double> _t11(_t7 ? _t6 * _t5 : 0);
        #pragma omp parallel for if(_t7)
        for (long _t8 = 0; _t8 < _t6; ++_t8) {
            double* _d_bias = _t7 ? (_t9.data()) + _t8 * _t4 : _t10;
            double* _d_w = _t7 ? (_t11.data()) + _t8 * _t5 : _t12;
            for (long _t13 = torchclad::par_begin(_t8, _t1, _t6); _t13 < torchclad::par_begin(_t8 + 1, _t1, _t6); ++_t13) {
                int b = static_cast<int>(_t13);
                double m = static_cast<double>(_t0[b]);
                const double* x = inp + b * C;
                double _d_m = double(0);
                if (bias != nullptr) {
                    {
                        double _lane0[16] = {};
                        int _ib0 = 0;
                        for (; _ib0 + 16 <= C; _ib0 += 16) {
                            #pragma omp simd
                            for (int _j0 = 0; _j0 < 16; ++_j0) {
                                int i = _ib0 + _j0;
                                double _r_d0 = _d_out[b * C + i];
                                _d_inp[x - inp + i] = _r_d0 * m;
                                _lane0[_j0] += x[i] * _r_d0;
                                _d_bias[i] += _r_d0;
                            }
                        }
                        for (int i = _ib0; i < C; ++i) {
                            double _r_d0 = _d_out[b * C + i];
                            _d_inp[x - inp + i] = _r_d0 * m;
                            _d_m += x[i] * _r_d0;
                            _d_bias[i] += _r_d0;
                        }
                        for (int _j0 = 0; _j0 < 16; ++_j0) {
                            _d_m += _lane0[_j0];
                        }
                    }
                } else {
                    {
                        double _lane1[16] = {};
                        int _ib1 = 0;
                        for (; _ib1 + 16 <= C; _ib1 += 16) {
                            #pragma omp simd
                            for (int _j1 = 0; _j1 < 16; ++_j1) {
                                int i = _ib1 + _j1;
                                double _r_d0 = _d_out[b * C + i];
                                _d_inp[x - inp + i] = _r_d0 * m;
                                _lane1[_j1] += x[i] * _r_d0;
                            }
                        }
                        for (int i = _ib1; i < C; ++i) {
                            double _r_d0 = _d_out[b * C + i];
                            _d_inp[x - inp + i] = _r_d0 * m;
                            _d_m += x[i] * _r_d0;
                        }
                        for (int _j1 = 0; _j1 < 16; ++_j1) {
                            _d_m += _lane1[_j1];
                        }
                    }
                }
                for (int i = 0; i < C; ++i) {
                    _d_inp[x - inp + i] += _d_m * w[i];
                    _d_w[i] += x[i] * _d_m;
                }
            }
        }
        if (_t7) {
            torchclad::par_combine(_t10, _t9.data(), _t6, _t4);
        }
        if (_t7) {
            torchclad::par_combine(_t12, _t11.data(), _t6, _t5);
        }
    }
}
