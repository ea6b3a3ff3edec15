clad::ValueAndPushforward<double, double> custom_pushforward_opaque_pushforward(double x, double y, double _d_x, double _d_y) {
    clad::ValueAndPushforward<double, double> _t0 = clad::custom_derivatives::clampish_pushforward(x, _d_x);
    double _d__call0 = _t0.pushforward;
    double _call0 = _t0.value;
    clad::ValueAndPushforward<double, double> _t1 = clad::custom_derivatives::clampish_pushforward(-y, -_d_y);
    double _d__call1 = _t1.pushforward;
    double _call1 = _t1.value;
    return clad::ValueAndPushforward<double, double>(_call0 * y + _call1, _d__call0 * y + _call0 * _d_y + _d__call1);
}
