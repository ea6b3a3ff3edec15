void pointer_arith_rows_pushforward(double* out, const double* inp, const double* scale, int B, int T, int C, double* _d_out, const double* _d_inp, const double* _d_scale) {
    for (int b = 0; b < B; ++b) {
        for (int t = 0; t < T; ++t) {
            const double* _d_x = _d_inp + b * T * C + t * C;
            const double* x = inp + b * T * C + t * C;
            double* _d_o = _d_out + b * T * C + t * C;
            double* o = out + b * T * C + t * C;
            double _d_ss = 0;
            double ss = 0.0;
            for (int i = 0; i < C; ++i) {
                _d_ss += _d_x[i] * x[i] + x[i] * _d_x[i];
                ss += x[i] * x[i];
            }
            for (int i = 0; i < C; ++i) {
                _d_o[i] = ((_d_x[i] * scale[i] + x[i] * _d_scale[i]) * (1.0 + ss) - x[i] * scale[i] * _d_ss) / ((1.0 + ss) * (1.0 + ss));
                o[i] = x[i] * scale[i] / (1.0 + ss);
            }
        }
    }
}
