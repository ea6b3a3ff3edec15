void abp06_unused_nan_pullback(double A, double C, double x, double _d_y, double* _d_A, double* _d_C, double* _d_x) {
    *_d_A += _d_y * (x * x);
    *_d_x += double(2) * (_d_y * (A * x));
    *_d_C += _d_y * x;
    *_d_x += C * _d_y;
}

void abp06_unused_nan_grad(double A, double C, double x, double* _d_A, double* _d_C, double* _d_x) {
    abp06_unused_nan_pullback(A, C, x, double(1), _d_A, _d_C, _d_x);
}

double abp06_unused_nan_reverse_forw(double A, double C, double x, torchclad::Tape& _tape) {
    return A * x * x + C * x;
}

void abp06_unused_nan_reverse_sweep(double A, double C, double x, double _d_y, double* _d_A, double* _d_C, double* _d_x, torchclad::Tape& _tape) {
    *_d_A += _d_y * (x * x);
    *_d_x += double(2) * (_d_y * (A * x));
    *_d_C += _d_y * x;
    *_d_x += C * _d_y;
}
