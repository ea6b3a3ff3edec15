clad::ValueAndPushforward<double, double> locals_assign_pushforward(double x, double y, double _d_x, double _d_y) {
    double _d_t = _d_x * y + x * _d_y;
    double t = x * y;
    _d_t = _d_t + _d_x;
    t = t + x;
    double _d_u = _d_t * t + t * _d_t;
    double u = t * t;
    _d_u = _d_u - _d_y;
    u = u - y;
    double _d_v = 0;
    double v;
    _d_v = _d_u * t + u * _d_t;
    v = u * t;
    _d_t = 0;
    t = 2.0;
    return clad::ValueAndPushforward<double, double>(v + t * x, _d_v + (_d_t * x + t * _d_x));
}
