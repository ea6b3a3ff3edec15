void fission_rows_pullback(double* y, const double* x, const double* w, const double* b, int N, int T, int C, int O, double* _d_y, double* _d_x, double* _d_w, double* _d_b) {
    #pragma omp parallel for collapse(2)
    for (int n = 0; n < N; ++n) {
        for (int t = 0; t < T; ++t) {
            int r = n * T + t;
            if (b != nullptr) {
                for (int o = 0; o < O; ++o) {
                    double acc = b[o];
                    for (int i = 0; i < C; ++i) {
                        acc += x[r * C + i] * w[o * C + i];
                    }
                    y[r * O + o] = acc;
                }
            } else {
                for (int o = 0; o < O; ++o) {
                    double acc = 0.0;
                    for (int i = 0; i < C; ++i) {
                        acc += x[r * C + i] * w[o * C + i];
                    }
                    y[r * O + o] = acc;
                }
            }
        }
    }
    if (C >= 0 && O >= 0) {
        #pragma omp parallel for collapse(2) if(C >= 0)
        for (int n = 0; n < N; ++n) {
            for (int t = 0; t < T; ++t) {
                int r = n * T + t;
                for (int o = 0; o < O; ++o) {
                    double _d_acc = double(0);
                    double _r_d0 = _d_y[r * O + o];
                    _d_acc += _r_d0;
                    for (int i = 0; i < C; ++i) {
                        _d_x[r * C + i] += _d_acc * w[o * C + i];
                    }
                }
            }
        }
        #pragma omp parallel for if(O >= 0)
        for (int o = 0; o < O; ++o) {
            for (int n = 0; n < N; ++n) {
                if (b != nullptr) {
                    double _acc0 = double(0);
                    for (int t = 0; t < T; ++t) {
                        int r = n * T + t;
                        double _d_acc = double(0);
                        double _r_d0 = _d_y[r * O + o];
                        _d_y[r * O + o] = 0;
                        _d_acc += _r_d0;
                        for (int i = 0; i < C; ++i) {
                            _d_w[o * C + i] += x[r * C + i] * _d_acc;
                        }
                        _acc0 += _d_acc;
                    }
                    if (_acc0 != double(0)) {
                        _d_b[o] += _acc0;
                    }
                } else {
                    for (int t = 0; t < T; ++t) {
                        int r = n * T + t;
                        double _d_acc = double(0);
                        double _r_d0 = _d_y[r * O + o];
                        _d_y[r * O + o] = 0;
                        _d_acc += _r_d0;
                        for (int i = 0; i < C; ++i) {
                            _d_w[o * C + i] += x[r * C + i] * _d_acc;
                        }
                    }
                }
            }
        }
    } else {
        {
            long _t0 = N > 0 ? N : 0;
            long _t1 = T > 0 ? T : 0;
            long _t3 = _t0 * _t1;
            bool _t4 = C >= 0 && O >= 0;
            long _t5 = (long)O;
            long _t6 = (long)C * (long)O;
            long _t7 = _t4 ? torchclad::par_chunks(_t3, _t5 + _t6, (long)(O > 0 ? O : 0) * (long)(C > 0 ? C : 0)) : 1;
            bool _t8 = _t7 > 1;
            double* _t11 = _d_b;
            std::vector<double> _t10(_t8 ? _t7 * _t5 : 0);
            double* _t13 = _d_w;
            std::vector<double> _t12(_t8 ? _t7 * _t6 : 0);
            #pragma omp parallel for if(_t8)
            for (long _t9 = 0; _t9 < _t7; ++_t9) {
                double* _d_b = _t8 ? (_t10.data()) + _t9 * _t5 : _t11;
                double* _d_w = _t8 ? (_t12.data()) + _t9 * _t6 : _t13;
                for (long _t14 = torchclad::par_begin(_t9, _t3, _t7); _t14 < torchclad::par_begin(_t9 + 1, _t3, _t7); ++_t14) {
                    int n = static_cast<int>(_t14 / _t1);
                    int t = static_cast<int>(_t14 % _t1);
                    int r = n * T + t;
                    if (b != nullptr) {
                        for (int o = 0; o < O; ++o) {
                            double _d_acc = double(0);
                            double _r_d0 = _d_y[r * O + o];
                            _d_y[r * O + o] = 0;
                            _d_acc += _r_d0;
                            for (int i = 0; i < C; ++i) {
                                _d_x[r * C + i] += _d_acc * w[o * C + i];
                                _d_w[o * C + i] += x[r * C + i] * _d_acc;
                            }
                            _d_b[o] += _d_acc;
                        }
                    } else {
                        for (int o = 0; o < O; ++o) {
                            double _d_acc = double(0);
                            double _r_d0 = _d_y[r * O + o];
                            _d_y[r * O + o] = 0;
                            _d_acc += _r_d0;
                            for (int i = 0; i < C; ++i) {
                                _d_x[r * C + i] += _d_acc * w[o * C + i];
                                _d_w[o * C + i] += x[r * C + i] * _d_acc;
                            }
                        }
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
}

void fission_rows_reverse_forw(double* y, const double* x, const double* w, const double* b, int N, int T, int C, int O, torchclad::Tape& _tape) {
    #pragma omp parallel for collapse(2)
    for (int n = 0; n < N; ++n) {
        for (int t = 0; t < T; ++t) {
            int r = n * T + t;
            if (b != nullptr) {
                for (int o = 0; o < O; ++o) {
                    double acc = b[o];
                    for (int i = 0; i < C; ++i) {
                        acc += x[r * C + i] * w[o * C + i];
                    }
                    y[r * O + o] = acc;
                }
            } else {
                for (int o = 0; o < O; ++o) {
                    double acc = 0.0;
                    for (int i = 0; i < C; ++i) {
                        acc += x[r * C + i] * w[o * C + i];
                    }
                    y[r * O + o] = acc;
                }
            }
        }
    }
}

void fission_rows_reverse_sweep(double* y, const double* x, const double* w, const double* b, int N, int T, int C, int O, double* _d_y, double* _d_x, double* _d_w, double* _d_b, torchclad::Tape& _tape) {
    if (C >= 0 && O >= 0) {
        #pragma omp parallel for collapse(2) if(C >= 0)
        for (int n = 0; n < N; ++n) {
            for (int t = 0; t < T; ++t) {
                int r = n * T + t;
                for (int o = 0; o < O; ++o) {
                    double _d_acc = double(0);
                    double _r_d0 = _d_y[r * O + o];
                    _d_acc += _r_d0;
                    for (int i = 0; i < C; ++i) {
                        _d_x[r * C + i] += _d_acc * w[o * C + i];
                    }
                }
            }
        }
        #pragma omp parallel for if(O >= 0)
        for (int o = 0; o < O; ++o) {
            for (int n = 0; n < N; ++n) {
                if (b != nullptr) {
                    double _acc0 = double(0);
                    for (int t = 0; t < T; ++t) {
                        int r = n * T + t;
                        double _d_acc = double(0);
                        double _r_d0 = _d_y[r * O + o];
                        _d_y[r * O + o] = 0;
                        _d_acc += _r_d0;
                        for (int i = 0; i < C; ++i) {
                            _d_w[o * C + i] += x[r * C + i] * _d_acc;
                        }
                        _acc0 += _d_acc;
                    }
                    if (_acc0 != double(0)) {
                        _d_b[o] += _acc0;
                    }
                } else {
                    for (int t = 0; t < T; ++t) {
                        int r = n * T + t;
                        double _d_acc = double(0);
                        double _r_d0 = _d_y[r * O + o];
                        _d_y[r * O + o] = 0;
                        _d_acc += _r_d0;
                        for (int i = 0; i < C; ++i) {
                            _d_w[o * C + i] += x[r * C + i] * _d_acc;
                        }
                    }
                }
            }
        }
    } else {
        {
            long _t0 = N > 0 ? N : 0;
            long _t1 = T > 0 ? T : 0;
            long _t3 = _t0 * _t1;
            bool _t4 = C >= 0 && O >= 0;
            long _t5 = (long)O;
            long _t6 = (long)C * (long)O;
            long _t7 = _t4 ? torchclad::par_chunks(_t3, _t5 + _t6, (long)(O > 0 ? O : 0) * (long)(C > 0 ? C : 0)) : 1;
            bool _t8 = _t7 > 1;
            double* _t11 = _d_b;
            std::vector<double> _t10(_t8 ? _t7 * _t5 : 0);
            double* _t13 = _d_w;
            std::vector<double> _t12(_t8 ? _t7 * _t6 : 0);
            #pragma omp parallel for if(_t8)
            for (long _t9 = 0; _t9 < _t7; ++_t9) {
                double* _d_b = _t8 ? (_t10.data()) + _t9 * _t5 : _t11;
                double* _d_w = _t8 ? (_t12.data()) + _t9 * _t6 : _t13;
                for (long _t14 = torchclad::par_begin(_t9, _t3, _t7); _t14 < torchclad::par_begin(_t9 + 1, _t3, _t7); ++_t14) {
                    int n = static_cast<int>(_t14 / _t1);
                    int t = static_cast<int>(_t14 % _t1);
                    int r = n * T + t;
                    if (b != nullptr) {
                        for (int o = 0; o < O; ++o) {
                            double _d_acc = double(0);
                            double _r_d0 = _d_y[r * O + o];
                            _d_y[r * O + o] = 0;
                            _d_acc += _r_d0;
                            for (int i = 0; i < C; ++i) {
                                _d_x[r * C + i] += _d_acc * w[o * C + i];
                                _d_w[o * C + i] += x[r * C + i] * _d_acc;
                            }
                            _d_b[o] += _d_acc;
                        }
                    } else {
                        for (int o = 0; o < O; ++o) {
                            double _d_acc = double(0);
                            double _r_d0 = _d_y[r * O + o];
                            _d_y[r * O + o] = 0;
                            _d_acc += _r_d0;
                            for (int i = 0; i < C; ++i) {
                                _d_x[r * C + i] += _d_acc * w[o * C + i];
                                _d_w[o * C + i] += x[r * C + i] * _d_acc;
                            }
                        }
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
}
