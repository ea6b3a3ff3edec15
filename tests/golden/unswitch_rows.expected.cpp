void unswitch_rows_pullback(double* y, const double* x, int N, int V, int S, double* _d_y, double* _d_x) {
    torchclad::Tape _tape;
    bool _disjoint0 = -(long)V + (long)S >= 0 && (long)S >= 0;
    for (int r = 0; r < N; ++r) {
        double* yr = y + r * S;
        double sum = 0.0;
        if (_disjoint0) {
            for (int j = 0; j < V; ++j) {
                yr[j] = std::exp(x[r * V + j]);
                sum += yr[j];
            }
        } else {
            for (int j = 0; j < V; ++j) {
                _tape.push(yr[j]);
                yr[j] = std::exp(x[r * V + j]);
                sum += yr[j];
            }
        }
        if (_disjoint0) {
            for (int j = 0; j < V; ++j) {
                yr[j] = yr[j] / sum;
            }
        } else {
            for (int j = 0; j < V; ++j) {
                _tape.push(yr[j]);
                yr[j] = yr[j] / sum;
            }
        }
        _tape.push(sum);
    }
    for (int r = N; r-- > 0; ) {
        double sum = _tape.pop<double>();
        double* yr = y + r * S;
        double _d_sum = double(0);
        if (_disjoint0) {
            {
                double _lane0[16] = {};
                int _ib0 = 0;
                for (; _ib0 + 16 <= V; _ib0 += 16) {
                    #pragma omp simd
                    for (int _j0 = 0; _j0 < 16; ++_j0) {
                        int j = _ib0 + _j0;
                        double _r_d1 = _d_y[yr - y + j];
                        _d_y[yr - y + j] = 0;
                        _lane0[_j0] += -_r_d1 * yr[j] / sum;
                        _d_y[yr - y + j] += _r_d1 / sum;
                    }
                }
                for (int j = _ib0; j < V; ++j) {
                    double _r_d1 = _d_y[yr - y + j];
                    _d_y[yr - y + j] = 0;
                    _d_sum += -_r_d1 * yr[j] / sum;
                    _d_y[yr - y + j] += _r_d1 / sum;
                }
                for (int _j0 = 0; _j0 < 16; ++_j0) {
                    _d_sum += _lane0[_j0];
                }
            }
        } else {
            for (int j = V; j-- > 0; ) {
                double _r_d1 = _d_y[yr - y + j];
                _d_y[yr - y + j] = 0;
                _d_sum += -_r_d1 * yr[j] / sum;
                yr[j] = _tape.pop<double>();
                _d_y[yr - y + j] += _r_d1 / sum;
            }
        }
        if (_disjoint0) {
            for (int j = 0; j < V; ++j) {
                _d_y[yr - y + j] += _d_sum;
                double _r_d0 = _d_y[yr - y + j];
                _d_y[yr - y + j] = 0;
                _d_x[r * V + j] += _r_d0 * std::exp(x[r * V + j]);
            }
        } else {
            for (int j = V; j-- > 0; ) {
                _d_y[yr - y + j] += _d_sum;
                double _r_d0 = _d_y[yr - y + j];
                _d_y[yr - y + j] = 0;
                yr[j] = _tape.pop<double>();
                _d_x[r * V + j] += _r_d0 * std::exp(x[r * V + j]);
            }
        }
    }
}

void unswitch_rows_reverse_forw(double* y, const double* x, int N, int V, int S, torchclad::Tape& _tape) {
    bool _disjoint0 = -(long)V + (long)S >= 0 && (long)S >= 0;
    for (int r = 0; r < N; ++r) {
        double* yr = y + r * S;
        double sum = 0.0;
        if (_disjoint0) {
            for (int j = 0; j < V; ++j) {
                yr[j] = std::exp(x[r * V + j]);
                sum += yr[j];
            }
        } else {
            for (int j = 0; j < V; ++j) {
                _tape.push(yr[j]);
                yr[j] = std::exp(x[r * V + j]);
                sum += yr[j];
            }
        }
        if (_disjoint0) {
            for (int j = 0; j < V; ++j) {
                yr[j] = yr[j] / sum;
            }
        } else {
            for (int j = 0; j < V; ++j) {
                _tape.push(yr[j]);
                yr[j] = yr[j] / sum;
            }
        }
        _tape.push(sum);
    }
}

void unswitch_rows_reverse_sweep(double* y, const double* x, int N, int V, int S, double* _d_y, double* _d_x, torchclad::Tape& _tape) {
    bool _disjoint0 = -(long)V + (long)S >= 0 && (long)S >= 0;
    for (int r = N; r-- > 0; ) {
        double sum = _tape.pop<double>();
        double* yr = y + r * S;
        double _d_sum = double(0);
        if (_disjoint0) {
            {
                double _lane0[16] = {};
                int _ib0 = 0;
                for (; _ib0 + 16 <= V; _ib0 += 16) {
                    #pragma omp simd
                    for (int _j0 = 0; _j0 < 16; ++_j0) {
                        int j = _ib0 + _j0;
                        double _r_d1 = _d_y[yr - y + j];
                        _d_y[yr - y + j] = 0;
                        _lane0[_j0] += -_r_d1 * yr[j] / sum;
                        _d_y[yr - y + j] += _r_d1 / sum;
                    }
                }
                for (int j = _ib0; j < V; ++j) {
                    double _r_d1 = _d_y[yr - y + j];
                    _d_y[yr - y + j] = 0;
                    _d_sum += -_r_d1 * yr[j] / sum;
                    _d_y[yr - y + j] += _r_d1 / sum;
                }
                for (int _j0 = 0; _j0 < 16; ++_j0) {
                    _d_sum += _lane0[_j0];
                }
            }
        } else {
            for (int j = V; j-- > 0; ) {
                double _r_d1 = _d_y[yr - y + j];
                _d_y[yr - y + j] = 0;
                _d_sum += -_r_d1 * yr[j] / sum;
                yr[j] = _tape.pop<double>();
                _d_y[yr - y + j] += _r_d1 / sum;
            }
        }
        if (_disjoint0) {
            for (int j = 0; j < V; ++j) {
                _d_y[yr - y + j] += _d_sum;
                double _r_d0 = _d_y[yr - y + j];
                _d_y[yr - y + j] = 0;
                _d_x[r * V + j] += _r_d0 * std::exp(x[r * V + j]);
            }
        } else {
            for (int j = V; j-- > 0; ) {
                _d_y[yr - y + j] += _d_sum;
                double _r_d0 = _d_y[yr - y + j];
                _d_y[yr - y + j] = 0;
                yr[j] = _tape.pop<double>();
                _d_x[r * V + j] += _r_d0 * std::exp(x[r * V + j]);
            }
        }
    }
}
