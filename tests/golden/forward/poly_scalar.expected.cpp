clad::ValueAndPushforward<double, double> poly_scalar_pushforward(double x, double y, double _d_x) {
    return clad::ValueAndPushforward<double, double>(3.0 * x * x * y - x / y + 2.0, (3.0 * _d_x * x + 3.0 * x * _d_x) * y - _d_x / y);
}

double poly_scalar_darg0(double x, double y) {
    double _d_x = 1;
    return (3.0 * _d_x * x + 3.0 * x * _d_x) * y - _d_x / y;
}
