void math_pow_pullback(double x, double y, double _d_y, double* _d_x, double* _d_y0) {
    torchclad::Tape _tape;
    double s = std::pow(x, y);
    _tape.push(s);
    s += std::pow(x, 3.0);
    _tape.push(s);
    s += std::pow(2.0, y);
    _tape.push(s);
    s += std::pow(x * y, 0.5);
    _tape.push(s);
    s += std::pow(y, 2);
    _tape.push(s);
    s += std::pow(y + 1.0, -x);
    double _d_s = double(0);
    _d_s += _d_y;
    s = _tape.pop<double>();
    *_d_y0 += _d_s * ::torchclad::rt::d_pow_base((y + 1.0), (-x));
    *_d_x += -(_d_s * ::torchclad::rt::d_pow_exp((y + 1.0), (-x), std::pow(y + 1.0, -x)));
    s = _tape.pop<double>();
    *_d_y0 += _d_s * ::torchclad::rt::d_pow_base(y, 2);
    s = _tape.pop<double>();
    *_d_x += (_d_s * ::torchclad::rt::d_pow_base((x * y), 0.5)) * y;
    *_d_y0 += x * (_d_s * ::torchclad::rt::d_pow_base((x * y), 0.5));
    s = _tape.pop<double>();
    *_d_y0 += _d_s * ::torchclad::rt::d_pow_exp(2.0, y, std::pow(2.0, y));
    s = _tape.pop<double>();
    *_d_x += _d_s * ::torchclad::rt::d_pow_base(x, 3.0);
    *_d_x += _d_s * ::torchclad::rt::d_pow_base(x, y);
    *_d_y0 += _d_s * ::torchclad::rt::d_pow_exp(x, y, s);
}

void math_pow_grad(double x, double y, double* _d_x, double* _d_y0) {
    math_pow_pullback(x, y, double(1), _d_x, _d_y0);
}

double math_pow_reverse_forw(double x, double y, torchclad::Tape& _tape) {
    double s = std::pow(x, y);
    _tape.push(s);
    s += std::pow(x, 3.0);
    _tape.push(s);
    s += std::pow(2.0, y);
    _tape.push(s);
    s += std::pow(x * y, 0.5);
    _tape.push(s);
    s += std::pow(y, 2);
    _tape.push(s);
    s += std::pow(y + 1.0, -x);
    _tape.push(s);
    return s;
}

void math_pow_reverse_sweep(double x, double y, double _d_y, double* _d_x, double* _d_y0, torchclad::Tape& _tape) {
    double s = _tape.pop<double>();
    double _d_s = double(0);
    _d_s += _d_y;
    s = _tape.pop<double>();
    *_d_y0 += _d_s * ::torchclad::rt::d_pow_base((y + 1.0), (-x));
    *_d_x += -(_d_s * ::torchclad::rt::d_pow_exp((y + 1.0), (-x), std::pow(y + 1.0, -x)));
    s = _tape.pop<double>();
    *_d_y0 += _d_s * ::torchclad::rt::d_pow_base(y, 2);
    s = _tape.pop<double>();
    *_d_x += (_d_s * ::torchclad::rt::d_pow_base((x * y), 0.5)) * y;
    *_d_y0 += x * (_d_s * ::torchclad::rt::d_pow_base((x * y), 0.5));
    s = _tape.pop<double>();
    *_d_y0 += _d_s * ::torchclad::rt::d_pow_exp(2.0, y, std::pow(2.0, y));
    s = _tape.pop<double>();
    *_d_x += _d_s * ::torchclad::rt::d_pow_base(x, 3.0);
    *_d_x += _d_s * ::torchclad::rt::d_pow_base(x, y);
    *_d_y0 += _d_s * ::torchclad::rt::d_pow_exp(x, y, s);
}
