template <typename T>
void layernorm_forward_t_pushforward(T* out, T* mean, T* rstd, const T* inp, const T* gamma, const T* beta, int B, int L, int C, T* _d_out, T* _d_mean, T* _d_rstd, const T* _d_inp, const T* _d_gamma, const T* _d_beta) {
    const T eps = T(1e-5);
    for (int b = 0; b < B; ++b) {
        for (int l = 0; l < L; ++l) {
            const T* _d_x = _d_inp + b * L * C + l * C;
            const T* x = inp + b * L * C + l * C;
            T _d_sum = 0;
            T sum = 0;
            for (int i = 0; i < C; ++i) {
                _d_sum += _d_x[i];
                sum += x[i];
            }
            T _d_mu = _d_sum / C;
            T mu = sum / C;
            T _d_var = 0;
            T var = 0;
            for (int i = 0; i < C; ++i) {
                _d_var += (_d_x[i] - _d_mu) * (x[i] - mu) + (x[i] - mu) * (_d_x[i] - _d_mu);
                var += (x[i] - mu) * (x[i] - mu);
            }
            _d_var = _d_var / C;
            var = var / C;
            const T _cse0 = std::sqrt(var + eps);
            T _d_rs = -(T(1) * (_d_var * ::torchclad::rt::d_sqrt(_cse0))) / (_cse0 * _cse0);
            T rs = T(1) / _cse0;
            T* _d_o = _d_out + b * L * C + l * C;
            T* o = out + b * L * C + l * C;
            for (int i = 0; i < C; ++i) {
                T _d_xhat = (_d_x[i] - _d_mu) * rs + (x[i] - mu) * _d_rs;
                T xhat = (x[i] - mu) * rs;
                _d_o[i] = _d_xhat * gamma[i] + xhat * _d_gamma[i] + _d_beta[i];
                o[i] = xhat * gamma[i] + beta[i];
            }
            _d_mean[b * L + l] = _d_mu;
            mean[b * L + l] = mu;
            _d_rstd[b * L + l] = _d_rs;
            rstd[b * L + l] = rs;
        }
    }
}
