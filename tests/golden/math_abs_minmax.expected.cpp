void math_abs_minmax_pullback(const double* x, int n, double _d_y, double* _d_x) {
    double _d_s = double(0);
    _d_s += _d_y;
    for (int i = 0; i < n - 1; ++i) {
        double a = x[i];
        double b = x[i + 1];
        double _d_a = double(0);
        double _d_b = double(0);
        _d_a += _d_s * ::torchclad::rt::d_max_a(a, (0.2 * b));
        _d_b += 0.2 * (_d_s * ::torchclad::rt::d_max_a((0.2 * b), a));
        _d_b += (3.0 * _d_s) * ::torchclad::rt::d_min_a(b, (a + 0.05));
        _d_a += (3.0 * _d_s) * ::torchclad::rt::d_min_a((a + 0.05), b);
        _d_a += (_d_s * 2.0) * ::torchclad::rt::d_max_a(a, b);
        _d_b += (_d_s * 2.0) * ::torchclad::rt::d_max_a(b, a);
        _d_a += double(2) * (((-_d_s) * ::torchclad::rt::d_min_a((a * a), b)) * a);
        _d_b += (-_d_s) * ::torchclad::rt::d_min_a(b, (a * a));
        _d_a += (_d_s * b) * ::torchclad::rt::sign(a);
        _d_b += std::fabs(a) * _d_s;
        _d_b += _d_s * ::torchclad::rt::sign((b - 0.1));
        _d_x[i + 1] += _d_b;
        _d_x[i] += _d_a;
    }
}

void math_abs_minmax_grad(const double* x, int n, double* _d_x) {
    math_abs_minmax_pullback(x, n, double(1), _d_x);
}

double math_abs_minmax_reverse_forw(const double* x, int n, torchclad::Tape& _tape) {
    double s = 0.0;
    for (int i = 0; i + 1 < n; ++i) {
        double a = x[i];
        double b = x[i + 1];
        s += std::fabs(a) * b + std::abs(b - 0.1);
        s += std::fmax(a, b) * 2.0 - std::fmin(a * a, b);
        s += std::max(a, 0.2 * b) + 3.0 * std::min(b, a + 0.05);
    }
    return s;
}

void math_abs_minmax_reverse_sweep(const double* x, int n, double _d_y, double* _d_x, torchclad::Tape& _tape) {
    double _d_s = double(0);
    _d_s += _d_y;
    for (int i = 0; i < n - 1; ++i) {
        double a = x[i];
        double b = x[i + 1];
        double _d_a = double(0);
        double _d_b = double(0);
        _d_a += _d_s * ::torchclad::rt::d_max_a(a, (0.2 * b));
        _d_b += 0.2 * (_d_s * ::torchclad::rt::d_max_a((0.2 * b), a));
        _d_b += (3.0 * _d_s) * ::torchclad::rt::d_min_a(b, (a + 0.05));
        _d_a += (3.0 * _d_s) * ::torchclad::rt::d_min_a((a + 0.05), b);
        _d_a += (_d_s * 2.0) * ::torchclad::rt::d_max_a(a, b);
        _d_b += (_d_s * 2.0) * ::torchclad::rt::d_max_a(b, a);
        _d_a += double(2) * (((-_d_s) * ::torchclad::rt::d_min_a((a * a), b)) * a);
        _d_b += (-_d_s) * ::torchclad::rt::d_min_a(b, (a * a));
        _d_a += (_d_s * b) * ::torchclad::rt::sign(a);
        _d_b += std::fabs(a) * _d_s;
        _d_b += _d_s * ::torchclad::rt::sign((b - 0.1));
        _d_x[i + 1] += _d_b;
        _d_x[i] += _d_a;
    }
}
