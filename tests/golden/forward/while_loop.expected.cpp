clad::ValueAndPushforward<double, double> while_loop_pushforward(const double* x, int n, double a, const double* _d_x, double _d_a) {
    int i = 0;
    double _d_s = 0;
    double s = 1.0;
    while (i < n) {
        _d_s = _d_s * a + s * _d_a + _d_x[i];
        s = s * a + x[i];
        i += 2;
    }
    i = n - 1;
    while (i > 0 && s < 100.0) {
        _d_s += _d_x[i] * a + x[i] * _d_a;
        s += x[i] * a;
        --i;
    }
    return clad::ValueAndPushforward<double, double>(s, _d_s);
}
