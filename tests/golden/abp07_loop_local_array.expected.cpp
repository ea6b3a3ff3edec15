void abp07_loop_local_array_pullback(const double* x, int n, double _d_y, double* _d_x) {
    torchclad::Tape _tape;
    for (int i = 0; i < n; ++i) {
        double tmp[3] = {x[i], 0.0, 1.0};
        bool _t0 = i % 2 == 0;
        if (_t0) {
            tmp[1] = x[i] * x[i];
        }
        _tape.push(_t0);
        _tape.push(tmp[2]);
        tmp[2] = tmp[2] * tmp[0];
        _tape.push_array(tmp, 3);
    }
    double _d_s = double(0);
    _d_s += _d_y;
    for (int i = n; i-- > 0; ) {
        double tmp[3];
        _tape.pop_array(tmp, 3);
        double _d_tmp[3] = {};
        _d_tmp[0] += _d_s * tmp[1];
        _d_tmp[1] += tmp[0] * _d_s;
        _d_tmp[2] += _d_s;
        double _r_d1 = _d_tmp[2];
        _d_tmp[2] = 0;
        tmp[2] = _tape.pop<double>();
        _d_tmp[2] += _r_d1 * tmp[0];
        _d_tmp[0] += tmp[2] * _r_d1;
        if (_tape.pop<bool>()) {
            double _r_d0 = _d_tmp[1];
            _d_tmp[1] = 0;
            _d_x[i] += double(2) * (_r_d0 * x[i]);
        }
        _d_x[i] += _d_tmp[0];
    }
}

void abp07_loop_local_array_grad(const double* x, int n, double* _d_x) {
    abp07_loop_local_array_pullback(x, n, double(1), _d_x);
}

double abp07_loop_local_array_reverse_forw(const double* x, int n, torchclad::Tape& _tape) {
    double s = 0.0;
    for (int i = 0; i < n; ++i) {
        double tmp[3] = {x[i], 0.0, 1.0};
        bool _t0 = i % 2 == 0;
        if (_t0) {
            tmp[1] = x[i] * x[i];
        }
        _tape.push(_t0);
        _tape.push(tmp[2]);
        tmp[2] = tmp[2] * tmp[0];
        s += tmp[0] * tmp[1] + tmp[2];
        _tape.push_array(tmp, 3);
    }
    return s;
}

void abp07_loop_local_array_reverse_sweep(const double* x, int n, double _d_y, double* _d_x, torchclad::Tape& _tape) {
    double _d_s = double(0);
    _d_s += _d_y;
    for (int i = n; i-- > 0; ) {
        double tmp[3];
        _tape.pop_array(tmp, 3);
        double _d_tmp[3] = {};
        _d_tmp[0] += _d_s * tmp[1];
        _d_tmp[1] += tmp[0] * _d_s;
        _d_tmp[2] += _d_s;
        double _r_d1 = _d_tmp[2];
        _d_tmp[2] = 0;
        tmp[2] = _tape.pop<double>();
        _d_tmp[2] += _r_d1 * tmp[0];
        _d_tmp[0] += tmp[2] * _r_d1;
        if (_tape.pop<bool>()) {
            double _r_d0 = _d_tmp[1];
            _d_tmp[1] = 0;
            _d_x[i] += double(2) * (_r_d0 * x[i]);
        }
        _d_x[i] += _d_tmp[0];
    }
}
