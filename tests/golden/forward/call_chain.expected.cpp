clad::ValueAndPushforward<double, double> h_pushforward(double v, double _d_v) {
    return clad::ValueAndPushforward<double, double>(std::exp(-v * v), (-_d_v * v + -v * _d_v) * std::exp(-v * v));
}

clad::ValueAndPushforward<double, double> g_pushforward(double a, double b, double _d_a, double _d_b) {
    clad::ValueAndPushforward<double, double> _t0 = h_pushforward(a, _d_a);
    double _d__call0 = _t0.pushforward;
    double _call0 = _t0.value;
    clad::ValueAndPushforward<double, double> _t1 = h_pushforward(b, _d_b);
    double _d__call1 = _t1.pushforward;
    double _call1 = _t1.value;
    return clad::ValueAndPushforward<double, double>(_call0 * b + _call1, _d__call0 * b + _call0 * _d_b + _d__call1);
}

clad::ValueAndPushforward<double, double> call_chain_pushforward(const double* x, int n, double w, const double* _d_x, double _d_w) {
    double _d_s = 0;
    double s = 0.0;
    for (int i = 0; i < n; ++i) {
        clad::ValueAndPushforward<double, double> _t0 = g_pushforward(x[i], w, _d_x[i], _d_w);
        double _d__call0 = _t0.pushforward;
        double _call0 = _t0.value;
        _d_s += _d__call0 * x[i] + _call0 * _d_x[i];
        s += _call0 * x[i];
    }
    clad::ValueAndPushforward<double, double> _t1 = g_pushforward(s, w, _d_s, _d_w);
    double _d__call1 = _t1.pushforward;
    double _call1 = _t1.value;
    return clad::ValueAndPushforward<double, double>(_call1, _d__call1);
}
