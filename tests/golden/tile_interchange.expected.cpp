void tile_interchange_pullback(double* y, const double* x, const double* w, int R, int K, int N, double* _d_y, double* _d_x, double* _d_w) {
    const int TILE = 4;
    for (int r0 = 0; r0 < R; r0 += 4) {
        for (int n = 0; n < N; ++n) {
            double acc[4];
            for (int j = 0; j < TILE; ++j) {
                acc[j] = 0.0;
            }
            for (int k = 0; k < K; ++k) {
                double wk = w[n * K + k];
                for (int j = 0; j < TILE; ++j) {
                    int r = r0 + j;
                    acc[j] += x[r * K + k] * wk;
                }
            }
            for (int j = 0; j < TILE; ++j) {
                y[(r0 + j) * N + n] = acc[j];
            }
        }
    }
    if (R > 0) {
        for (int r0 = 0 + (R - 0 - 1) / 4 * 4; r0 >= 0; r0 -= 4) {
            for (int n = N; n-- > 0; ) {
                double _d_acc[4] = {};
                for (int j = TILE; j-- > 0; ) {
                    double _r_d0 = _d_y[(r0 + j) * N + n];
                    _d_y[(r0 + j) * N + n] = 0;
                    _d_acc[j] += _r_d0;
                }
                for (int j = 0; j < TILE; ++j) {
                    for (int k = 0; k < K; ++k) {
                        double wk = w[n * K + k];
                        int r = r0 + j;
                        _d_x[r * K + k] += _d_acc[j] * wk;
                        _d_w[n * K + k] += x[r * K + k] * _d_acc[j];
                    }
                }
            }
        }
    }
}

void tile_interchange_reverse_forw(double* y, const double* x, const double* w, int R, int K, int N, torchclad::Tape& _tape) {
    const int TILE = 4;
    for (int r0 = 0; r0 < R; r0 += 4) {
        for (int n = 0; n < N; ++n) {
            double acc[4];
            for (int j = 0; j < TILE; ++j) {
                acc[j] = 0.0;
            }
            for (int k = 0; k < K; ++k) {
                double wk = w[n * K + k];
                for (int j = 0; j < TILE; ++j) {
                    int r = r0 + j;
                    acc[j] += x[r * K + k] * wk;
                }
            }
            for (int j = 0; j < TILE; ++j) {
                y[(r0 + j) * N + n] = acc[j];
            }
        }
    }
}

void tile_interchange_reverse_sweep(double* y, const double* x, const double* w, int R, int K, int N, double* _d_y, double* _d_x, double* _d_w, torchclad::Tape& _tape) {
    const int TILE = 4;
    if (R > 0) {
        for (int r0 = 0 + (R - 0 - 1) / 4 * 4; r0 >= 0; r0 -= 4) {
            for (int n = N; n-- > 0; ) {
                double _d_acc[4] = {};
                for (int j = TILE; j-- > 0; ) {
                    double _r_d0 = _d_y[(r0 + j) * N + n];
                    _d_y[(r0 + j) * N + n] = 0;
                    _d_acc[j] += _r_d0;
                }
                for (int j = 0; j < TILE; ++j) {
                    for (int k = 0; k < K; ++k) {
                        double wk = w[n * K + k];
                        int r = r0 + j;
                        _d_x[r * K + k] += _d_acc[j] * wk;
                        _d_w[n * K + k] += x[r * K + k] * _d_acc[j];
                    }
                }
            }
        }
    }
}
