template <typename T>
void layernorm_forward_t_pullback(T* out, T* mean, T* rstd, const T* inp, const T* gamma, const T* beta, int B, int L, int C, T* _d_out, T* _d_mean, T* _d_rstd, T* _d_inp, T* _d_gamma, T* _d_beta) {
    torchclad::Tape _tape;
    const T eps = T(1e-5);
    for (int b = 0; b < B; ++b) {
        for (int l = 0; l < L; ++l) {
            const T* x = inp + b * L * C + l * C;
            T sum = 0;
            for (int i = 0; i < C; ++i) {
                sum += x[i];
            }
            T mu = sum / C;
            T var = 0;
            for (int i = 0; i < C; ++i) {
                var += (x[i] - mu) * (x[i] - mu);
            }
            var = var / C;
            T rs = T(1) / std::sqrt(var + eps);
            T* o = out + b * L * C + l * C;
            for (int i = 0; i < C; ++i) {
                T xhat = (x[i] - mu) * rs;
                o[i] = xhat * gamma[i] + beta[i];
            }
            mean[b * L + l] = mu;
            rstd[b * L + l] = rs;
            _tape.push(sum);
            _tape.push(var);
        }
    }
    for (int b = B; b-- > 0; ) {
        for (int l = L; l-- > 0; ) {
            T var = _tape.pop<T>();
            T sum = _tape.pop<T>();
            const T* x = inp + b * L * C + l * C;
            T mu = sum / C;
            T rs = T(1) / std::sqrt(var + eps);
            T* o = out + b * L * C + l * C;
            T _d_sum = T(0);
            T _d_mu = T(0);
            T _d_var = T(0);
            T _d_rs = T(0);
            T _r_d3 = _d_rstd[b * L + l];
            _d_rstd[b * L + l] = 0;
            _d_rs += _r_d3;
            T _r_d2 = _d_mean[b * L + l];
            _d_mean[b * L + l] = 0;
            _d_mu += _r_d2;
            {
                T _lane0[16] = {};
                T _lane0_1[16] = {};
                int _ib0 = 0;
                for (; _ib0 + 16 <= C; _ib0 += 16) {
                    #pragma omp simd
                    for (int _j0 = 0; _j0 < 16; ++_j0) {
                        int i = _ib0 + _j0;
                        T xhat = (x[i] - mu) * rs;
                        T _d_xhat = T(0);
                        T _r_d1 = _d_out[o - out + i];
                        _d_out[o - out + i] = 0;
                        _d_xhat += _r_d1 * gamma[i];
                        _d_gamma[i] += xhat * _r_d1;
                        _d_beta[i] += _r_d1;
                        _d_inp[x - inp + i] += _d_xhat * rs;
                        _lane0[_j0] += -(_d_xhat * rs);
                        _lane0_1[_j0] += (x[i] - mu) * _d_xhat;
                    }
                }
                for (int i = _ib0; i < C; ++i) {
                    T xhat = (x[i] - mu) * rs;
                    T _d_xhat = T(0);
                    T _r_d1 = _d_out[o - out + i];
                    _d_out[o - out + i] = 0;
                    _d_xhat += _r_d1 * gamma[i];
                    _d_gamma[i] += xhat * _r_d1;
                    _d_beta[i] += _r_d1;
                    _d_inp[x - inp + i] += _d_xhat * rs;
                    _d_mu += -(_d_xhat * rs);
                    _d_rs += (x[i] - mu) * _d_xhat;
                }
                for (int _j0 = 0; _j0 < 16; ++_j0) {
                    _d_mu += _lane0[_j0];
                    _d_rs += _lane0_1[_j0];
                }
            }
            const T _cse0 = std::sqrt(var + eps);
            _d_var += (-_d_rs * T(1) / (_cse0 * _cse0)) * ::torchclad::rt::d_sqrt(_cse0);
            T _r_d0 = _d_var;
            _d_var = 0;
            _d_var += _r_d0 / C;
            {
                T _lane1[16] = {};
                int _ib1 = 0;
                for (; _ib1 + 16 <= C; _ib1 += 16) {
                    #pragma omp simd
                    for (int _j1 = 0; _j1 < 16; ++_j1) {
                        int i = _ib1 + _j1;
                        _d_inp[x - inp + i] += T(2) * (_d_var * (x[i] - mu));
                        _lane1[_j1] += -(T(2) * (_d_var * (x[i] - mu)));
                    }
                }
                for (int i = _ib1; i < C; ++i) {
                    _d_inp[x - inp + i] += T(2) * (_d_var * (x[i] - mu));
                    _d_mu += -(T(2) * (_d_var * (x[i] - mu)));
                }
                for (int _j1 = 0; _j1 < 16; ++_j1) {
                    _d_mu += _lane1[_j1];
                }
            }
            _d_sum += _d_mu / C;
            for (int i = 0; i < C; ++i) {
                _d_inp[x - inp + i] += _d_sum;
            }
        }
    }
}

template <typename T>
void layernorm_forward_t_reverse_forw(T* out, T* mean, T* rstd, const T* inp, const T* gamma, const T* beta, int B, int L, int C, torchclad::Tape& _tape) {
    const T eps = T(1e-5);
    for (int b = 0; b < B; ++b) {
        for (int l = 0; l < L; ++l) {
            const T* x = inp + b * L * C + l * C;
            T sum = 0;
            for (int i = 0; i < C; ++i) {
                sum += x[i];
            }
            T mu = sum / C;
            T var = 0;
            for (int i = 0; i < C; ++i) {
                var += (x[i] - mu) * (x[i] - mu);
            }
            var = var / C;
            T rs = T(1) / std::sqrt(var + eps);
            T* o = out + b * L * C + l * C;
            for (int i = 0; i < C; ++i) {
                T xhat = (x[i] - mu) * rs;
                o[i] = xhat * gamma[i] + beta[i];
            }
            mean[b * L + l] = mu;
            rstd[b * L + l] = rs;
            _tape.push(sum);
            _tape.push(var);
        }
    }
}

template <typename T>
void layernorm_forward_t_reverse_sweep(T* out, T* mean, T* rstd, const T* inp, const T* gamma, const T* beta, int B, int L, int C, T* _d_out, T* _d_mean, T* _d_rstd, T* _d_inp, T* _d_gamma, T* _d_beta, torchclad::Tape& _tape) {
    const T eps = T(1e-5);
    for (int b = B; b-- > 0; ) {
        for (int l = L; l-- > 0; ) {
            T var = _tape.pop<T>();
            T sum = _tape.pop<T>();
            const T* x = inp + b * L * C + l * C;
            T mu = sum / C;
            T rs = T(1) / std::sqrt(var + eps);
            T* o = out + b * L * C + l * C;
            T _d_sum = T(0);
            T _d_mu = T(0);
            T _d_var = T(0);
            T _d_rs = T(0);
            T _r_d3 = _d_rstd[b * L + l];
            _d_rstd[b * L + l] = 0;
            _d_rs += _r_d3;
            T _r_d2 = _d_mean[b * L + l];
            _d_mean[b * L + l] = 0;
            _d_mu += _r_d2;
            {
                T _lane0[16] = {};
                T _lane0_1[16] = {};
                int _ib0 = 0;
                for (; _ib0 + 16 <= C; _ib0 += 16) {
                    #pragma omp simd
                    for (int _j0 = 0; _j0 < 16; ++_j0) {
                        int i = _ib0 + _j0;
                        T xhat = (x[i] - mu) * rs;
                        T _d_xhat = T(0);
                        T _r_d1 = _d_out[o - out + i];
                        _d_out[o - out + i] = 0;
                        _d_xhat += _r_d1 * gamma[i];
                        _d_gamma[i] += xhat * _r_d1;
                        _d_beta[i] += _r_d1;
                        _d_inp[x - inp + i] += _d_xhat * rs;
                        _lane0[_j0] += -(_d_xhat * rs);
                        _lane0_1[_j0] += (x[i] - mu) * _d_xhat;
                    }
                }
                for (int i = _ib0; i < C; ++i) {
                    T xhat = (x[i] - mu) * rs;
                    T _d_xhat = T(0);
                    T _r_d1 = _d_out[o - out + i];
                    _d_out[o - out + i] = 0;
                    _d_xhat += _r_d1 * gamma[i];
                    _d_gamma[i] += xhat * _r_d1;
                    _d_beta[i] += _r_d1;
                    _d_inp[x - inp + i] += _d_xhat * rs;
                    _d_mu += -(_d_xhat * rs);
                    _d_rs += (x[i] - mu) * _d_xhat;
                }
                for (int _j0 = 0; _j0 < 16; ++_j0) {
                    _d_mu += _lane0[_j0];
                    _d_rs += _lane0_1[_j0];
                }
            }
            const T _cse0 = std::sqrt(var + eps);
            _d_var += (-_d_rs * T(1) / (_cse0 * _cse0)) * ::torchclad::rt::d_sqrt(_cse0);
            T _r_d0 = _d_var;
            _d_var = 0;
            _d_var += _r_d0 / C;
            {
                T _lane1[16] = {};
                int _ib1 = 0;
                for (; _ib1 + 16 <= C; _ib1 += 16) {
                    #pragma omp simd
                    for (int _j1 = 0; _j1 < 16; ++_j1) {
                        int i = _ib1 + _j1;
                        _d_inp[x - inp + i] += T(2) * (_d_var * (x[i] - mu));
                        _lane1[_j1] += -(T(2) * (_d_var * (x[i] - mu)));
                    }
                }
                for (int i = _ib1; i < C; ++i) {
                    _d_inp[x - inp + i] += T(2) * (_d_var * (x[i] - mu));
                    _d_mu += -(T(2) * (_d_var * (x[i] - mu)));
                }
                for (int _j1 = 0; _j1 < 16; ++_j1) {
                    _d_mu += _lane1[_j1];
                }
            }
            _d_sum += _d_mu / C;
            for (int i = 0; i < C; ++i) {
                _d_inp[x - inp + i] += _d_sum;
            }
        }
    }
}

template <typename T>
void layernorm_forward_t_reverse_sweep_assign(T* out, T* mean, T* rstd, const T* inp, const T* gamma, const T* beta, int B, int L, int C, T* _d_out, T* _d_mean, T* _d_rstd, T* _d_inp, T* _d_gamma, T* _d_beta, torchclad::Tape& _tape) {
    const T eps = T(1e-5);
    for (int b = B; b-- > 0; ) {
        for (int l = L; l-- > 0; ) {
            T var = _tape.pop<T>();
            T sum = _tape.pop<T>();
            const T* x = inp + b * L * C + l * C;
            T mu = sum / C;
            T rs = T(1) / std::sqrt(var + eps);
            T* o = out + b * L * C + l * C;
            T _d_sum = T(0);
            T _d_mu = T(0);
            T _d_var = T(0);
            T _d_rs = T(0);
            T _r_d3 = _d_rstd[b * L + l];
            _d_rs += _r_d3;
            T _r_d2 = _d_mean[b * L + l];
            _d_mu += _r_d2;
            {
                T _lane0[16] = {};
                T _lane0_1[16] = {};
                int _ib0 = 0;
                for (; _ib0 + 16 <= C; _ib0 += 16) {
                    #pragma omp simd
                    for (int _j0 = 0; _j0 < 16; ++_j0) {
                        int i = _ib0 + _j0;
                        T xhat = (x[i] - mu) * rs;
                        T _d_xhat = T(0);
                        T _r_d1 = _d_out[o - out + i];
                        _d_xhat += _r_d1 * gamma[i];
                        _d_gamma[i] += xhat * _r_d1;
                        _d_beta[i] += _r_d1;
                        _d_inp[x - inp + i] += _d_xhat * rs;
                        _lane0[_j0] += -(_d_xhat * rs);
                        _lane0_1[_j0] += (x[i] - mu) * _d_xhat;
                    }
                }
                for (int i = _ib0; i < C; ++i) {
                    T xhat = (x[i] - mu) * rs;
                    T _d_xhat = T(0);
                    T _r_d1 = _d_out[o - out + i];
                    _d_xhat += _r_d1 * gamma[i];
                    _d_gamma[i] += xhat * _r_d1;
                    _d_beta[i] += _r_d1;
                    _d_inp[x - inp + i] += _d_xhat * rs;
                    _d_mu += -(_d_xhat * rs);
                    _d_rs += (x[i] - mu) * _d_xhat;
                }
                for (int _j0 = 0; _j0 < 16; ++_j0) {
                    _d_mu += _lane0[_j0];
                    _d_rs += _lane0_1[_j0];
                }
            }
            const T _cse0 = std::sqrt(var + eps);
            _d_var += (-_d_rs * T(1) / (_cse0 * _cse0)) * ::torchclad::rt::d_sqrt(_cse0);
            T _r_d0 = _d_var;
            _d_var = 0;
            _d_var += _r_d0 / C;
            {
                T _lane1[16] = {};
                int _ib1 = 0;
                for (; _ib1 + 16 <= C; _ib1 += 16) {
                    #pragma omp simd
                    for (int _j1 = 0; _j1 < 16; ++_j1) {
                        int i = _ib1 + _j1;
                        _d_inp[x - inp + i] += T(2) * (_d_var * (x[i] - mu));
                        _lane1[_j1] += -(T(2) * (_d_var * (x[i] - mu)));
                    }
                }
                for (int i = _ib1; i < C; ++i) {
                    _d_inp[x - inp + i] += T(2) * (_d_var * (x[i] - mu));
                    _d_mu += -(T(2) * (_d_var * (x[i] - mu)));
                }
                for (int _j1 = 0; _j1 < 16; ++_j1) {
                    _d_mu += _lane1[_j1];
                }
            }
            _d_sum += _d_mu / C;
            for (int i = 0; i < C; ++i) {
                _d_inp[x - inp + i] += _d_sum;
            }
        }
    }
}
