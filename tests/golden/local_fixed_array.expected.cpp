void local_fixed_array_pullback(const double* x, double _d_y, double* _d_x) {
    torchclad::Tape _tape;
    double buf[4];
    double acc[3] = {0.0, 1.0, 2.0};
    for (int i = 0; i < 4; ++i) {
        buf[i] = x[i] * x[(i + 1) % 4];
    }
    for (int i = 0; i < 3; ++i) {
        acc[i] += buf[i] * buf[i + 1];
    }
    _tape.push(buf[2]);
    buf[2] = acc[0] - buf[3];
    double _d_buf[4] = {};
    double _d_acc[3] = {};
    _d_acc[0] += _d_y;
    _d_acc[1] += _d_y * acc[2];
    _d_acc[2] += acc[1] * _d_y;
    _d_buf[2] += _d_y;
    double _r_d1 = _d_buf[2];
    _d_buf[2] = 0;
    buf[2] = _tape.pop<double>();
    _d_acc[0] += _r_d1;
    _d_buf[3] += -_r_d1;
    for (int i = 0; i < 3; ++i) {
        _d_buf[i] += _d_acc[i] * buf[i + 1];
        _d_buf[i + 1] += buf[i] * _d_acc[i];
    }
    for (int i = 0; i < 4; ++i) {
        double _r_d0 = _d_buf[i];
        _d_buf[i] = 0;
        _d_x[i] += _r_d0 * x[(i + 1) % 4];
        _d_x[(i + 1) % 4] += x[i] * _r_d0;
    }
}

void local_fixed_array_grad(const double* x, double* _d_x) {
    local_fixed_array_pullback(x, double(1), _d_x);
}

double local_fixed_array_reverse_forw(const double* x, torchclad::Tape& _tape) {
    double buf[4];
    double acc[3] = {0.0, 1.0, 2.0};
    for (int i = 0; i < 4; ++i) {
        buf[i] = x[i] * x[(i + 1) % 4];
    }
    for (int i = 0; i < 3; ++i) {
        acc[i] += buf[i] * buf[i + 1];
    }
    _tape.push(buf[2]);
    buf[2] = acc[0] - buf[3];
    _tape.push_array(buf, 4);
    _tape.push_array(acc, 3);
    return acc[0] + acc[1] * acc[2] + buf[2];
}

void local_fixed_array_reverse_sweep(const double* x, double _d_y, double* _d_x, torchclad::Tape& _tape) {
    double acc[3];
    _tape.pop_array(acc, 3);
    double buf[4];
    _tape.pop_array(buf, 4);
    double _d_buf[4] = {};
    double _d_acc[3] = {};
    _d_acc[0] += _d_y;
    _d_acc[1] += _d_y * acc[2];
    _d_acc[2] += acc[1] * _d_y;
    _d_buf[2] += _d_y;
    double _r_d1 = _d_buf[2];
    _d_buf[2] = 0;
    buf[2] = _tape.pop<double>();
    _d_acc[0] += _r_d1;
    _d_buf[3] += -_r_d1;
    for (int i = 0; i < 3; ++i) {
        _d_buf[i] += _d_acc[i] * buf[i + 1];
        _d_buf[i + 1] += buf[i] * _d_acc[i];
    }
    for (int i = 0; i < 4; ++i) {
        double _r_d0 = _d_buf[i];
        _d_buf[i] = 0;
        _d_x[i] += _r_d0 * x[(i + 1) % 4];
        _d_x[(i + 1) % 4] += x[i] * _r_d0;
    }
}
