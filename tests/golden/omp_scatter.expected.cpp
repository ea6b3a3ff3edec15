void omp_scatter_pullback(double* out, const long* idx, const double* table, int N, int C, double* _d_out, double* _d_table) {
    #pragma omp parallel for
    for (int n = 0; n < N; ++n) {
        for (int i = 0; i < C; ++i) {
            out[n * C + i] = table[idx[n] * C + i] * table[idx[n] * C + i];
        }
    }
    for (int n = 0; n < N; ++n) {
        for (int i = 0; i < C; ++i) {
            double _r_d0 = _d_out[n * C + i];
            _d_out[n * C + i] = 0;
            _d_table[idx[n] * C + i] += double(2) * (_r_d0 * table[idx[n] * C + i]);
        }
    }
}

void omp_scatter_reverse_forw(double* out, const long* idx, const double* table, int N, int C, torchclad::Tape& _tape) {
    #pragma omp parallel for
    for (int n = 0; n < N; ++n) {
        for (int i = 0; i < C; ++i) {
            out[n * C + i] = table[idx[n] * C + i] * table[idx[n] * C + i];
        }
    }
}

void omp_scatter_reverse_sweep(double* out, const long* idx, const double* table, int N, int C, double* _d_out, double* _d_table, torchclad::Tape& _tape) {
    for (int n = 0; n < N; ++n) {
        for (int i = 0; i < C; ++i) {
            double _r_d0 = _d_out[n * C + i];
            _d_out[n * C + i] = 0;
            _d_table[idx[n] * C + i] += double(2) * (_r_d0 * table[idx[n] * C + i]);
        }
    }
}

void omp_scatter_reverse_sweep_assign(double* out, const long* idx, const double* table, int N, int C, double* _d_out, double* _d_table, torchclad::Tape& _tape) {
    for (int n = 0; n < N; ++n) {
        for (int i = 0; i < C; ++i) {
            double _r_d0 = _d_out[n * C + i];
            _d_table[idx[n] * C + i] += double(2) * (_r_d0 * table[idx[n] * C + i]);
        }
    }
}
