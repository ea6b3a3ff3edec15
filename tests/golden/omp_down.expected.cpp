void omp_down_pullback(double* out, const double* x, double a, int n, double* _d_out, double* _d_x, double* _d_a) {
    #pragma omp parallel for
    for (int i = n - 1; i >= 0; --i) {
        out[i] = std::sin(a * x[i]) * x[i];
    }
    {
        long _t0 = n - 1 >= 0 ? n - 1 - 0 + 1 : 0;
        long _t1 = 1;
        long _t2 = torchclad::par_chunks(_t0, _t1, 1);
        bool _t3 = _t2 > 1;
        double* _t6 = _d_a;
        std::vector<double> _t5(_t3 ? _t2 * _t1 : 0);
        #pragma omp parallel for if(_t3)
        for (long _t4 = 0; _t4 < _t2; ++_t4) {
            double* _d_a = _t3 ? (_t5.data()) + _t4 * _t1 : _t6;
            double _acc0 = double(0);
            for (long _t7 = torchclad::par_begin(_t4, _t0, _t2); _t7 < torchclad::par_begin(_t4 + 1, _t0, _t2); ++_t7) {
                int i = static_cast<int>(n - 1 - _t7);
                double _r_d0 = _d_out[i];
                _d_out[i] = 0;
                _acc0 += ((_r_d0 * x[i]) * std::cos((a * x[i]))) * x[i];
                _d_x[i] += a * ((_r_d0 * x[i]) * std::cos((a * x[i])));
                _d_x[i] += std::sin(a * x[i]) * _r_d0;
            }
            if (_acc0 != double(0)) {
                *_d_a += _acc0;
            }
        }
        if (_t3) {
            torchclad::par_combine(_t6, _t5.data(), _t2, _t1);
        }
    }
}

void omp_down_reverse_forw(double* out, const double* x, double a, int n, torchclad::Tape& _tape) {
    #pragma omp parallel for
    for (int i = n - 1; i >= 0; --i) {
        out[i] = std::sin(a * x[i]) * x[i];
    }
}

void omp_down_reverse_sweep(double* out, const double* x, double a, int n, double* _d_out, double* _d_x, double* _d_a, torchclad::Tape& _tape) {
    {
        long _t0 = n - 1 >= 0 ? n - 1 - 0 + 1 : 0;
        long _t1 = 1;
        long _t2 = torchclad::par_chunks(_t0, _t1, 1);
        bool _t3 = _t2 > 1;
        double* _t6 = _d_a;
        std::vector<double> _t5(_t3 ? _t2 * _t1 : 0);
        #pragma omp parallel for if(_t3)
        for (long _t4 = 0; _t4 < _t2; ++_t4) {
            double* _d_a = _t3 ? (_t5.data()) + _t4 * _t1 : _t6;
            double _acc0 = double(0);
            for (long _t7 = torchclad::par_begin(_t4, _t0, _t2); _t7 < torchclad::par_begin(_t4 + 1, _t0, _t2); ++_t7) {
                int i = static_cast<int>(n - 1 - _t7);
                double _r_d0 = _d_out[i];
                _d_out[i] = 0;
                _acc0 += ((_r_d0 * x[i]) * std::cos((a * x[i]))) * x[i];
                _d_x[i] += a * ((_r_d0 * x[i]) * std::cos((a * x[i])));
                _d_x[i] += std::sin(a * x[i]) * _r_d0;
            }
            if (_acc0 != double(0)) {
                *_d_a += _acc0;
            }
        }
        if (_t3) {
            torchclad::par_combine(_t6, _t5.data(), _t2, _t1);
        }
    }
}
