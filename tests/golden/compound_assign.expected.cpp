void compound_assign_pullback(double x, double y, double _d_y, double* _d_x, double* _d_y0) {
    torchclad::Tape _tape;
    double a = x;
    a += y * y;
    a -= 0.5 * x;
    _tape.push(a);
    a = a * (x + 1.0);
    _tape.push(a);
    a = a / (y + 3.0);
    double b = a;
    _tape.push(b);
    b = b * b;
    _tape.push(b);
    b = b / (x * x + 1.0);
    _tape.push(b);
    b -= a;
    _tape.push(b);
    b += y;
    double _d_a = double(0);
    double _d_b = double(0);
    _d_b += _d_y;
    b = _tape.pop<double>();
    *_d_y0 += _d_b;
    b = _tape.pop<double>();
    _d_a += -_d_b;
    double _r_d3 = _d_b;
    _d_b = 0;
    *_d_x += double(2) * (-_r_d3 * b / (x * x + 1.0) * x);
    b = _tape.pop<double>();
    _d_b += _r_d3 / (x * x + 1.0);
    double _r_d2 = _d_b;
    _d_b = 0;
    b = _tape.pop<double>();
    _d_b += double(2) * (_r_d2 * b);
    _d_a += _d_b;
    double _r_d1 = _d_a;
    _d_a = 0;
    *_d_y0 += -_r_d1 * a / (y + 3.0);
    a = _tape.pop<double>();
    _d_a += _r_d1 / (y + 3.0);
    double _r_d0 = _d_a;
    _d_a = 0;
    a = _tape.pop<double>();
    _d_a += _r_d0 * (x + 1.0);
    *_d_x += a * _r_d0;
    *_d_x += 0.5 * -_d_a;
    *_d_y0 += double(2) * (_d_a * y);
    *_d_x += _d_a;
}

void compound_assign_grad(double x, double y, double* _d_x, double* _d_y0) {
    compound_assign_pullback(x, y, double(1), _d_x, _d_y0);
}

double compound_assign_reverse_forw(double x, double y, torchclad::Tape& _tape) {
    double a = x;
    a += y * y;
    a -= 0.5 * x;
    _tape.push(a);
    a = a * (x + 1.0);
    _tape.push(a);
    a = a / (y + 3.0);
    double b = a;
    _tape.push(b);
    b = b * b;
    _tape.push(b);
    b = b / (x * x + 1.0);
    _tape.push(b);
    b -= a;
    _tape.push(b);
    b += y;
    _tape.push(a);
    _tape.push(b);
    return b;
}

void compound_assign_reverse_sweep(double x, double y, double _d_y, double* _d_x, double* _d_y0, torchclad::Tape& _tape) {
    double b = _tape.pop<double>();
    double a = _tape.pop<double>();
    double _d_a = double(0);
    double _d_b = double(0);
    _d_b += _d_y;
    b = _tape.pop<double>();
    *_d_y0 += _d_b;
    b = _tape.pop<double>();
    _d_a += -_d_b;
    double _r_d3 = _d_b;
    _d_b = 0;
    *_d_x += double(2) * (-_r_d3 * b / (x * x + 1.0) * x);
    b = _tape.pop<double>();
    _d_b += _r_d3 / (x * x + 1.0);
    double _r_d2 = _d_b;
    _d_b = 0;
    b = _tape.pop<double>();
    _d_b += double(2) * (_r_d2 * b);
    _d_a += _d_b;
    double _r_d1 = _d_a;
    _d_a = 0;
    *_d_y0 += -_r_d1 * a / (y + 3.0);
    a = _tape.pop<double>();
    _d_a += _r_d1 / (y + 3.0);
    double _r_d0 = _d_a;
    _d_a = 0;
    a = _tape.pop<double>();
    _d_a += _r_d0 * (x + 1.0);
    *_d_x += a * _r_d0;
    *_d_x += 0.5 * -_d_a;
    *_d_y0 += double(2) * (_d_a * y);
    *_d_x += _d_a;
}
