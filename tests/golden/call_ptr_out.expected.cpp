void polar_reverse_forw(double r, double th, double* px, double* py, torchclad::Tape& _tape) {
    px[0] = r * std::cos(th);
    py[0] = r * std::sin(th);
}

void polar_reverse_sweep(double r, double th, double* px, double* py, double* _d_r, double* _d_th, double* _d_px, double* _d_py, torchclad::Tape& _tape) {
    double _r_d1 = _d_py[0];
    _d_py[0] = 0;
    *_d_r += _r_d1 * std::sin(th);
    *_d_th += (r * _r_d1) * std::cos(th);
    double _r_d0 = _d_px[0];
    _d_px[0] = 0;
    *_d_r += _r_d0 * std::cos(th);
    *_d_th += -(r * _r_d0) * std::sin(th);
}

void axpy_reverse_forw(int n, double a, const double* x, double* y, torchclad::Tape& _tape) {
    for (int i = 0; i < n; ++i) {
        y[i] += a * x[i];
    }
}

void axpy_reverse_sweep(int n, double a, const double* x, double* y, double* _d_a, double* _d_x, double* _d_y, torchclad::Tape& _tape) {
    double _acc0 = double(0);
    {
        double _lane0[16] = {};
        int _ib0 = 0;
        for (; _ib0 + 16 <= n; _ib0 += 16) {
            #pragma omp simd
            for (int _j0 = 0; _j0 < 16; ++_j0) {
                int i = _ib0 + _j0;
                _lane0[_j0] += _d_y[i] * x[i];
                _d_x[i] += a * _d_y[i];
            }
        }
        for (int i = _ib0; i < n; ++i) {
            _acc0 += _d_y[i] * x[i];
            _d_x[i] += a * _d_y[i];
        }
        for (int _j0 = 0; _j0 < 16; ++_j0) {
            _acc0 += _lane0[_j0];
        }
    }
    if (_acc0 != double(0)) {
        *_d_a += _acc0;
    }
}

void call_ptr_out_pullback(double r, double th, const double* v, double _d_y, double* _d_r, double* _d_th, double* _d_v) {
    torchclad::Tape _tape;
    double px = double(0);
    double py = double(0);
    polar_reverse_forw(r, th, &px, &py, _tape);
    double acc[3] = {px, py, 0.0};
    axpy_reverse_forw(3, r, v, acc, _tape);
    double _d_px = double(0);
    double _d_py = double(0);
    double _d_acc[3] = {};
    _d_acc[0] += _d_y * acc[1];
    _d_acc[1] += acc[0] * _d_y;
    _d_acc[2] += _d_y;
    double _r2 = double(0);
    axpy_reverse_sweep(3, r, v, acc, &_r2, _d_v, _d_acc, _tape);
    *_d_r += _r2;
    _d_px += _d_acc[0];
    _d_py += _d_acc[1];
    double _r0 = double(0);
    double _r1 = double(0);
    polar_reverse_sweep(r, th, &px, &py, &_r0, &_r1, &_d_px, &_d_py, _tape);
    *_d_r += _r0;
    *_d_th += _r1;
}

void call_ptr_out_grad(double r, double th, const double* v, double* _d_r, double* _d_th, double* _d_v) {
    call_ptr_out_pullback(r, th, v, double(1), _d_r, _d_th, _d_v);
}

double call_ptr_out_reverse_forw(double r, double th, const double* v, torchclad::Tape& _tape) {
    double px = double(0);
    double py = double(0);
    polar_reverse_forw(r, th, &px, &py, _tape);
    double acc[3] = {px, py, 0.0};
    axpy_reverse_forw(3, r, v, acc, _tape);
    _tape.push(px);
    _tape.push(py);
    _tape.push_array(acc, 3);
    return acc[0] * acc[1] + acc[2];
}

void call_ptr_out_reverse_sweep(double r, double th, const double* v, double _d_y, double* _d_r, double* _d_th, double* _d_v, torchclad::Tape& _tape) {
    double acc[3];
    _tape.pop_array(acc, 3);
    double py = _tape.pop<double>();
    double px = _tape.pop<double>();
    double _d_px = double(0);
    double _d_py = double(0);
    double _d_acc[3] = {};
    _d_acc[0] += _d_y * acc[1];
    _d_acc[1] += acc[0] * _d_y;
    _d_acc[2] += _d_y;
    double _r2 = double(0);
    axpy_reverse_sweep(3, r, v, acc, &_r2, _d_v, _d_acc, _tape);
    *_d_r += _r2;
    _d_px += _d_acc[0];
    _d_py += _d_acc[1];
    double _r0 = double(0);
    double _r1 = double(0);
    polar_reverse_sweep(r, th, &px, &py, &_r0, &_r1, &_d_px, &_d_py, _tape);
    *_d_r += _r0;
    *_d_th += _r1;
}
