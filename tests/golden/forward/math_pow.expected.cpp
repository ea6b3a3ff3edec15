clad::ValueAndPushforward<double, double> math_pow_pushforward(double x, double y, double _d_x, double _d_y) {
    double s = std::pow(x, y);
    double _d_s = _d_x * ::torchclad::rt::d_pow_base(x, y) + _d_y * ::torchclad::rt::d_pow_exp(x, y, s);
    _d_s += _d_x * ::torchclad::rt::d_pow_base(x, 3.0);
    s += std::pow(x, 3.0);
    const double _cse0 = std::pow(2.0, y);
    _d_s += _d_y * ::torchclad::rt::d_pow_exp(2.0, y, _cse0);
    s += _cse0;
    _d_s += (_d_x * y + x * _d_y) * ::torchclad::rt::d_pow_base(x * y, 0.5);
    s += std::pow(x * y, 0.5);
    _d_s += _d_y * ::torchclad::rt::d_pow_base(y, 2);
    s += std::pow(y, 2);
    const double _cse1 = std::pow(y + 1.0, -x);
    _d_s += _d_y * ::torchclad::rt::d_pow_base(y + 1.0, -x) + -_d_x * ::torchclad::rt::d_pow_exp(y + 1.0, -x, _cse1);
    s += _cse1;
    return clad::ValueAndPushforward<double, double>(s, _d_s);
}
