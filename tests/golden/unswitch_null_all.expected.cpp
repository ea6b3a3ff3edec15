void unswitch_null_pullback(double* out, const double* inp, const double* weight, const double* bias, const double* scale, int N, int C, double* _d_out, double* _d_inp, double* _d_weight, double* _d_bias, double* _d_scale) {
    torchclad::Tape _tape;
    if (scale != nullptr) {
        for (int n = 0; n < N; ++n) {
            double m = 0;
            if (weight != nullptr) {
                for (int i = 0; i < C; ++i) {
                    m += inp[n * C + i] * weight[i];
                }
            } else {
                for (int i = 0; i < C; ++i) {
                    m += inp[n * C + i] * 1.0;
                }
            }
            double k = (double)1 / 2;
            if (bias != nullptr && weight != nullptr) {
                for (int i = 0; i < C; ++i) {
                    double y = inp[n * C + i] * m * k;
                    y += bias[i] * inp[n * C + i];
                    _tape.push(y);
                    y = y * scale[i];
                    out[n * C + i] = y;
                    _tape.push(y);
                }
            } else {
                for (int i = 0; i < C; ++i) {
                    double y = inp[n * C + i] * m * k;
                    if (bias != nullptr) {
                        y += bias[i] * inp[n * C + i];
                    }
                    if (!weight) {
                        y = y * 2;
                    }
                    _tape.push(y);
                    y = y * scale[i];
                    out[n * C + i] = y;
                    _tape.push(y);
                }
            }
            _tape.push(m);
        }
    } else {
        for (int n = 0; n < N; ++n) {
            double m = 0;
            if (weight != nullptr) {
                for (int i = 0; i < C; ++i) {
                    m += inp[n * C + i] * weight[i];
                }
            } else {
                for (int i = 0; i < C; ++i) {
                    m += inp[n * C + i] * 1.0;
                }
            }
            double k = 0.5 / 2;
            if (bias != nullptr && weight != nullptr) {
                for (int i = 0; i < C; ++i) {
                    double y = inp[n * C + i] * m * k;
                    y += bias[i] * inp[n * C + i];
                    out[n * C + i] = y;
                    _tape.push(y);
                }
            } else {
                for (int i = 0; i < C; ++i) {
                    double y = inp[n * C + i] * m * k;
                    if (bias != nullptr) {
                        y += bias[i] * inp[n * C + i];
                    }
                    if (!weight) {
                        y = y * 2;
                    }
                    out[n * C + i] = y;
                    _tape.push(y);
                }
            }
            _tape.push(m);
        }
    }
    if (scale != nullptr) {
        for (int n = N; n-- > 0; ) {
            double m = _tape.pop<double>();
            double k = (double)1 / 2;
            double _d_m = double(0);
            if (bias != nullptr && weight != nullptr) {
                for (int i = C; i-- > 0; ) {
                    double y = _tape.pop<double>();
                    double _d_y = double(0);
                    double _r_d2 = _d_out[n * C + i];
                    _d_out[n * C + i] = 0;
                    _d_y += _r_d2;
                    double _r_d1 = _d_y;
                    _d_y = 0;
                    y = _tape.pop<double>();
                    _d_y += _r_d1 * scale[i];
                    _d_scale[i] += y * _r_d1;
                    _d_bias[i] += _d_y * inp[n * C + i];
                    _d_inp[n * C + i] += bias[i] * _d_y;
                    _d_inp[n * C + i] += _d_y * k * m;
                    _d_m += inp[n * C + i] * (_d_y * k);
                }
            } else {
                for (int i = C; i-- > 0; ) {
                    double y = _tape.pop<double>();
                    double _d_y = double(0);
                    double _r_d2 = _d_out[n * C + i];
                    _d_out[n * C + i] = 0;
                    _d_y += _r_d2;
                    double _r_d1 = _d_y;
                    _d_y = 0;
                    y = _tape.pop<double>();
                    _d_y += _r_d1 * scale[i];
                    _d_scale[i] += y * _r_d1;
                    if (!weight) {
                        double _r_d0 = _d_y;
                        _d_y = 0;
                        _d_y += _r_d0 * 2;
                    }
                    if (bias != nullptr) {
                        _d_bias[i] += _d_y * inp[n * C + i];
                        _d_inp[n * C + i] += bias[i] * _d_y;
                    }
                    _d_inp[n * C + i] += _d_y * k * m;
                    _d_m += inp[n * C + i] * (_d_y * k);
                }
            }
            if (weight != nullptr) {
                for (int i = 0; i < C; ++i) {
                    _d_inp[n * C + i] += _d_m * weight[i];
                    _d_weight[i] += inp[n * C + i] * _d_m;
                }
            } else {
                for (int i = 0; i < C; ++i) {
                    _d_inp[n * C + i] += _d_m * 1.0;
                }
            }
        }
    } else {
        for (int n = N; n-- > 0; ) {
            double m = _tape.pop<double>();
            double k = 0.5 / 2;
            double _d_m = double(0);
            if (bias != nullptr && weight != nullptr) {
                for (int i = C; i-- > 0; ) {
                    _tape.pop<double>();
                    double _d_y = double(0);
                    double _r_d2 = _d_out[n * C + i];
                    _d_out[n * C + i] = 0;
                    _d_y += _r_d2;
                    _d_bias[i] += _d_y * inp[n * C + i];
                    _d_inp[n * C + i] += bias[i] * _d_y;
                    _d_inp[n * C + i] += _d_y * k * m;
                    _d_m += inp[n * C + i] * (_d_y * k);
                }
            } else {
                for (int i = C; i-- > 0; ) {
                    _tape.pop<double>();
                    double _d_y = double(0);
                    double _r_d2 = _d_out[n * C + i];
                    _d_out[n * C + i] = 0;
                    _d_y += _r_d2;
                    if (!weight) {
                        double _r_d0 = _d_y;
                        _d_y = 0;
                        _d_y += _r_d0 * 2;
                    }
                    if (bias != nullptr) {
                        _d_bias[i] += _d_y * inp[n * C + i];
                        _d_inp[n * C + i] += bias[i] * _d_y;
                    }
                    _d_inp[n * C + i] += _d_y * k * m;
                    _d_m += inp[n * C + i] * (_d_y * k);
                }
            }
            if (weight != nullptr) {
                for (int i = 0; i < C; ++i) {
                    _d_inp[n * C + i] += _d_m * weight[i];
                    _d_weight[i] += inp[n * C + i] * _d_m;
                }
            } else {
                for (int i = 0; i < C; ++i) {
                    _d_inp[n * C + i] += _d_m * 1.0;
                }
            }
        }
    }
}

void unswitch_null_reverse_forw(double* out, const double* inp, const double* weight, const double* bias, const double* scale, int N, int C, torchclad::Tape& _tape) {
    if (scale != nullptr) {
        for (int n = 0; n < N; ++n) {
            double m = 0;
            if (weight != nullptr) {
                for (int i = 0; i < C; ++i) {
                    m += inp[n * C + i] * weight[i];
                }
            } else {
                for (int i = 0; i < C; ++i) {
                    m += inp[n * C + i] * 1.0;
                }
            }
            double k = (double)1 / 2;
            if (bias != nullptr && weight != nullptr) {
                for (int i = 0; i < C; ++i) {
                    double y = inp[n * C + i] * m * k;
                    y += bias[i] * inp[n * C + i];
                    _tape.push(y);
                    y = y * scale[i];
                    out[n * C + i] = y;
                    _tape.push(y);
                }
            } else {
                for (int i = 0; i < C; ++i) {
                    double y = inp[n * C + i] * m * k;
                    if (bias != nullptr) {
                        y += bias[i] * inp[n * C + i];
                    }
                    if (!weight) {
                        y = y * 2;
                    }
                    _tape.push(y);
                    y = y * scale[i];
                    out[n * C + i] = y;
                    _tape.push(y);
                }
            }
            _tape.push(m);
        }
    } else {
        for (int n = 0; n < N; ++n) {
            double m = 0;
            if (weight != nullptr) {
                for (int i = 0; i < C; ++i) {
                    m += inp[n * C + i] * weight[i];
                }
            } else {
                for (int i = 0; i < C; ++i) {
                    m += inp[n * C + i] * 1.0;
                }
            }
            double k = 0.5 / 2;
            if (bias != nullptr && weight != nullptr) {
                for (int i = 0; i < C; ++i) {
                    double y = inp[n * C + i] * m * k;
                    y += bias[i] * inp[n * C + i];
                    out[n * C + i] = y;
                    _tape.push(y);
                }
            } else {
                for (int i = 0; i < C; ++i) {
                    double y = inp[n * C + i] * m * k;
                    if (bias != nullptr) {
                        y += bias[i] * inp[n * C + i];
                    }
                    if (!weight) {
                        y = y * 2;
                    }
                    out[n * C + i] = y;
                    _tape.push(y);
                }
            }
            _tape.push(m);
        }
    }
}

void unswitch_null_reverse_sweep(double* out, const double* inp, const double* weight, const double* bias, const double* scale, int N, int C, double* _d_out, double* _d_inp, double* _d_weight, double* _d_bias, double* _d_scale, torchclad::Tape& _tape) {
    if (scale != nullptr) {
        for (int n = N; n-- > 0; ) {
            double m = _tape.pop<double>();
            double k = (double)1 / 2;
            double _d_m = double(0);
            if (bias != nullptr && weight != nullptr) {
                for (int i = C; i-- > 0; ) {
                    double y = _tape.pop<double>();
                    double _d_y = double(0);
                    double _r_d2 = _d_out[n * C + i];
                    _d_out[n * C + i] = 0;
                    _d_y += _r_d2;
                    double _r_d1 = _d_y;
                    _d_y = 0;
                    y = _tape.pop<double>();
                    _d_y += _r_d1 * scale[i];
                    _d_scale[i] += y * _r_d1;
                    _d_bias[i] += _d_y * inp[n * C + i];
                    _d_inp[n * C + i] += bias[i] * _d_y;
                    _d_inp[n * C + i] += _d_y * k * m;
                    _d_m += inp[n * C + i] * (_d_y * k);
                }
            } else {
                for (int i = C; i-- > 0; ) {
                    double y = _tape.pop<double>();
                    double _d_y = double(0);
                    double _r_d2 = _d_out[n * C + i];
                    _d_out[n * C + i] = 0;
                    _d_y += _r_d2;
                    double _r_d1 = _d_y;
                    _d_y = 0;
                    y = _tape.pop<double>();
                    _d_y += _r_d1 * scale[i];
                    _d_scale[i] += y * _r_d1;
                    if (!weight) {
                        double _r_d0 = _d_y;
                        _d_y = 0;
                        _d_y += _r_d0 * 2;
                    }
                    if (bias != nullptr) {
                        _d_bias[i] += _d_y * inp[n * C + i];
                        _d_inp[n * C + i] += bias[i] * _d_y;
                    }
                    _d_inp[n * C + i] += _d_y * k * m;
                    _d_m += inp[n * C + i] * (_d_y * k);
                }
            }
            if (weight != nullptr) {
                for (int i = 0; i < C; ++i) {
                    _d_inp[n * C + i] += _d_m * weight[i];
                    _d_weight[i] += inp[n * C + i] * _d_m;
                }
            } else {
                for (int i = 0; i < C; ++i) {
                    _d_inp[n * C + i] += _d_m * 1.0;
                }
            }
        }
    } else {
        for (int n = N; n-- > 0; ) {
            double m = _tape.pop<double>();
            double k = 0.5 / 2;
            double _d_m = double(0);
            if (bias != nullptr && weight != nullptr) {
                for (int i = C; i-- > 0; ) {
                    _tape.pop<double>();
                    double _d_y = double(0);
                    double _r_d2 = _d_out[n * C + i];
                    _d_out[n * C + i] = 0;
                    _d_y += _r_d2;
                    _d_bias[i] += _d_y * inp[n * C + i];
                    _d_inp[n * C + i] += bias[i] * _d_y;
                    _d_inp[n * C + i] += _d_y * k * m;
                    _d_m += inp[n * C + i] * (_d_y * k);
                }
            } else {
                for (int i = C; i-- > 0; ) {
                    _tape.pop<double>();
                    double _d_y = double(0);
                    double _r_d2 = _d_out[n * C + i];
                    _d_out[n * C + i] = 0;
                    _d_y += _r_d2;
                    if (!weight) {
                        double _r_d0 = _d_y;
                        _d_y = 0;
                        _d_y += _r_d0 * 2;
                    }
                    if (bias != nullptr) {
                        _d_bias[i] += _d_y * inp[n * C + i];
                        _d_inp[n * C + i] += bias[i] * _d_y;
                    }
                    _d_inp[n * C + i] += _d_y * k * m;
                    _d_m += inp[n * C + i] * (_d_y * k);
                }
            }
            if (weight != nullptr) {
                for (int i = 0; i < C; ++i) {
                    _d_inp[n * C + i] += _d_m * weight[i];
                    _d_weight[i] += inp[n * C + i] * _d_m;
                }
            } else {
                for (int i = 0; i < C; ++i) {
                    _d_inp[n * C + i] += _d_m * 1.0;
                }
            }
        }
    }
}

void unswitch_null_reverse_sweep_assign(double* out, const double* inp, const double* weight, const double* bias, const double* scale, int N, int C, double* _d_out, double* _d_inp, double* _d_weight, double* _d_bias, double* _d_scale, torchclad::Tape& _tape) {
    if (scale != nullptr) {
        for (int n = N; n-- > 0; ) {
            double m = _tape.pop<double>();
            double k = (double)1 / 2;
            double _d_m = double(0);
            if (bias != nullptr && weight != nullptr) {
                for (int i = C; i-- > 0; ) {
                    double y = _tape.pop<double>();
                    double _d_y = double(0);
                    double _r_d2 = _d_out[n * C + i];
                    _d_y += _r_d2;
                    double _r_d1 = _d_y;
                    _d_y = 0;
                    y = _tape.pop<double>();
                    _d_y += _r_d1 * scale[i];
                    _d_scale[i] += y * _r_d1;
                    _d_bias[i] += _d_y * inp[n * C + i];
                    _d_inp[n * C + i] += bias[i] * _d_y;
                    _d_inp[n * C + i] += _d_y * k * m;
                    _d_m += inp[n * C + i] * (_d_y * k);
                }
            } else {
                for (int i = C; i-- > 0; ) {
                    double y = _tape.pop<double>();
                    double _d_y = double(0);
                    double _r_d2 = _d_out[n * C + i];
                    _d_y += _r_d2;
                    double _r_d1 = _d_y;
                    _d_y = 0;
                    y = _tape.pop<double>();
                    _d_y += _r_d1 * scale[i];
                    _d_scale[i] += y * _r_d1;
                    if (!weight) {
                        double _r_d0 = _d_y;
                        _d_y = 0;
                        _d_y += _r_d0 * 2;
                    }
                    if (bias != nullptr) {
                        _d_bias[i] += _d_y * inp[n * C + i];
                        _d_inp[n * C + i] += bias[i] * _d_y;
                    }
                    _d_inp[n * C + i] += _d_y * k * m;
                    _d_m += inp[n * C + i] * (_d_y * k);
                }
            }
            if (weight != nullptr) {
                for (int i = 0; i < C; ++i) {
                    _d_inp[n * C + i] += _d_m * weight[i];
                    _d_weight[i] += inp[n * C + i] * _d_m;
                }
            } else {
                for (int i = 0; i < C; ++i) {
                    _d_inp[n * C + i] += _d_m * 1.0;
                }
            }
        }
    } else {
        for (int n = N; n-- > 0; ) {
            double m = _tape.pop<double>();
            double k = 0.5 / 2;
            double _d_m = double(0);
            if (bias != nullptr && weight != nullptr) {
                for (int i = C; i-- > 0; ) {
                    _tape.pop<double>();
                    double _d_y = double(0);
                    double _r_d2 = _d_out[n * C + i];
                    _d_y += _r_d2;
                    _d_bias[i] += _d_y * inp[n * C + i];
                    _d_inp[n * C + i] += bias[i] * _d_y;
                    _d_inp[n * C + i] += _d_y * k * m;
                    _d_m += inp[n * C + i] * (_d_y * k);
                }
            } else {
                for (int i = C; i-- > 0; ) {
                    _tape.pop<double>();
                    double _d_y = double(0);
                    double _r_d2 = _d_out[n * C + i];
                    _d_y += _r_d2;
                    if (!weight) {
                        double _r_d0 = _d_y;
                        _d_y = 0;
                        _d_y += _r_d0 * 2;
                    }
                    if (bias != nullptr) {
                        _d_bias[i] += _d_y * inp[n * C + i];
                        _d_inp[n * C + i] += bias[i] * _d_y;
                    }
                    _d_inp[n * C + i] += _d_y * k * m;
                    _d_m += inp[n * C + i] * (_d_y * k);
                }
            }
            if (weight != nullptr) {
                for (int i = 0; i < C; ++i) {
                    _d_inp[n * C + i] += _d_m * weight[i];
                    _d_weight[i] += inp[n * C + i] * _d_m;
                }
            } else {
                for (int i = 0; i < C; ++i) {
                    _d_inp[n * C + i] += _d_m * 1.0;
                }
            }
        }
    }
}
