void cast_int_float_pullback(double x, double y, int k, double _d_y, double* _d_x, double* _d_y0) {
    int n = (int)(x * 3.0);
    double fn = (double)n;
    long m = static_cast<long>(y);
    unsigned int u = (unsigned int)k;
    double _d_r = double(0);
    _d_r += _d_y;
    *_d_x += (double)(u % 3u) * _d_r;
    *_d_x += m * (_d_r * y);
    *_d_y0 += m * x * _d_r;
    *_d_x += fn * _d_r;
    *_d_y0 += static_cast<double>(k) * _d_r;
}

void cast_int_float_grad(double x, double y, int k, double* _d_x, double* _d_y0) {
    cast_int_float_pullback(x, y, k, double(1), _d_x, _d_y0);
}

double cast_int_float_reverse_forw(double x, double y, int k, torchclad::Tape& _tape) {
    int n = (int)(x * 3.0);
    double fn = (double)n;
    long m = static_cast<long>(y);
    double r = fn * x + static_cast<double>(k) * y;
    r += m * x * y;
    unsigned int u = (unsigned int)k;
    r += (double)(u % 3u) * x;
    int q = n / 2;
    r += q;
    return r;
}

void cast_int_float_reverse_sweep(double x, double y, int k, double _d_y, double* _d_x, double* _d_y0, torchclad::Tape& _tape) {
    int n = (int)(x * 3.0);
    double fn = (double)n;
    long m = static_cast<long>(y);
    unsigned int u = (unsigned int)k;
    double _d_r = double(0);
    _d_r += _d_y;
    *_d_x += (double)(u % 3u) * _d_r;
    *_d_x += m * (_d_r * y);
    *_d_y0 += m * x * _d_r;
    *_d_x += fn * _d_r;
    *_d_y0 += static_cast<double>(k) * _d_r;
}
