template <typename T>
void attention_forward_t_pullback(T* out, T* preatt, T* att, const T* inp, int B, int L, int C, int NH, T* _d_out, T* _d_preatt, T* _d_att, T* _d_inp) {
    torchclad::Tape _tape;
    bool _disjoint0 = (long)L >= 0 && (long)L * (long)L >= 0 && (long)L * (long)L * (long)NH >= 0;
    int hs = C / NH;
    T scale = T(1) / std::sqrt(T(hs));
    for (int b = 0; b < B; ++b) {
        const T* base = inp + b * L * 3 * C;
        for (int h = 0; h < NH; ++h) {
            for (int t = 0; t < L; ++t) {
                T* pre = preatt + ((b * NH + h) * L + t) * L;
                T* w = att + ((b * NH + h) * L + t) * L;
                T mx = T(-1e4);
                if (_disjoint0) {
                    for (int s = 0; s <= t; ++s) {
                        T dot = 0;
                        for (int i = 0; i < hs; ++i) {
                            dot += base[t * 3 * C + h * hs + i] * base[s * 3 * C + C + h * hs + i];
                        }
                        pre[s] = dot * scale;
                        _tape.push(mx);
                        mx = pre[s] > mx ? pre[s] : mx;
                    }
                } else {
                    for (int s = 0; s <= t; ++s) {
                        T dot = 0;
                        for (int i = 0; i < hs; ++i) {
                            dot += base[t * 3 * C + h * hs + i] * base[s * 3 * C + C + h * hs + i];
                        }
                        _tape.push(pre[s]);
                        pre[s] = dot * scale;
                        _tape.push(mx);
                        mx = pre[s] > mx ? pre[s] : mx;
                    }
                }
                T sum = 0;
                if (_disjoint0) {
                    for (int s = 0; s <= t; ++s) {
                        w[s] = std::exp(pre[s] - mx);
                        sum += w[s];
                    }
                } else {
                    for (int s = 0; s <= t; ++s) {
                        _tape.push(w[s]);
                        w[s] = std::exp(pre[s] - mx);
                        sum += w[s];
                    }
                }
                if (_disjoint0) {
                    for (int s = 0; s <= t; ++s) {
                        w[s] = w[s] / sum;
                    }
                } else {
                    for (int s = 0; s <= t; ++s) {
                        _tape.push(w[s]);
                        w[s] = w[s] / sum;
                    }
                }
                if (_disjoint0) {
                    for (int s = t + 1; s < L; ++s) {
                        w[s] = 0;
                    }
                } else {
                    for (int s = t + 1; s < L; ++s) {
                        _tape.push(w[s]);
                        w[s] = 0;
                    }
                }
                T* o = out + (b * L + t) * C + h * hs;
                for (int i = 0; i < hs; ++i) {
                    T acc = 0;
                    for (int s = 0; s <= t; ++s) {
                        acc += w[s] * base[s * 3 * C + 2 * C + h * hs + i];
                    }
                    o[i] = acc;
                }
                _tape.push(mx);
                _tape.push(sum);
            }
        }
    }
    for (int b = B; b-- > 0; ) {
        const T* base = inp + b * L * 3 * C;
        for (int h = NH; h-- > 0; ) {
            for (int t = L; t-- > 0; ) {
                T sum = _tape.pop<T>();
                T mx = _tape.pop<T>();
                T* pre = preatt + ((b * NH + h) * L + t) * L;
                T* w = att + ((b * NH + h) * L + t) * L;
                T* o = out + (b * L + t) * C + h * hs;
                T _d_mx = T(0);
                T _d_sum = T(0);
                for (int i = 0; i < hs; ++i) {
                    T _d_acc = T(0);
                    T _r_d4 = _d_out[o - out + i];
                    _d_out[o - out + i] = 0;
                    _d_acc += _r_d4;
                    for (int s = 0; s < t + 1; ++s) {
                        _d_att[w - att + s] += _d_acc * base[s * 3 * C + 2 * C + h * hs + i];
                        _d_inp[base - inp + (s * 3 * C + 2 * C + h * hs + i)] += w[s] * _d_acc;
                    }
                }
                if (_disjoint0) {
                    for (int s = t + 1; s < L; ++s) {
                        _d_att[w - att + s] = 0;
                    }
                } else {
                    for (int s = L; s-- > (t + 1); ) {
                        _d_att[w - att + s] = 0;
                        w[s] = _tape.pop<T>();
                    }
                }
                if (_disjoint0) {
                    {
                        T _lane0[16] = {};
                        int _ib0 = 0;
                        for (; _ib0 + 16 <= t + 1; _ib0 += 16) {
                            #pragma omp simd
                            for (int _j0 = 0; _j0 < 16; ++_j0) {
                                int s = _ib0 + _j0;
                                T _r_d3 = _d_att[w - att + s];
                                _d_att[w - att + s] = 0;
                                _lane0[_j0] += -_r_d3 * w[s] / sum;
                                _d_att[w - att + s] += _r_d3 / sum;
                            }
                        }
                        for (int s = _ib0; s < t + 1; ++s) {
                            T _r_d3 = _d_att[w - att + s];
                            _d_att[w - att + s] = 0;
                            _d_sum += -_r_d3 * w[s] / sum;
                            _d_att[w - att + s] += _r_d3 / sum;
                        }
                        for (int _j0 = 0; _j0 < 16; ++_j0) {
                            _d_sum += _lane0[_j0];
                        }
                    }
                } else {
                    for (int s = t + 1; s-- > 0; ) {
                        T _r_d3 = _d_att[w - att + s];
                        _d_att[w - att + s] = 0;
                        _d_sum += -_r_d3 * w[s] / sum;
                        w[s] = _tape.pop<T>();
                        _d_att[w - att + s] += _r_d3 / sum;
                    }
                }
                if (_disjoint0) {
                    {
                        T _lane1[16] = {};
                        int _ib1 = 0;
                        for (; _ib1 + 16 <= t + 1; _ib1 += 16) {
                            #pragma omp simd
                            for (int _j1 = 0; _j1 < 16; ++_j1) {
                                int s = _ib1 + _j1;
                                _d_att[w - att + s] += _d_sum;
                                T _r_d2 = _d_att[w - att + s];
                                _d_att[w - att + s] = 0;
                                const T _cse0 = std::exp(pre[s] - mx);
                                _d_preatt[pre - preatt + s] += _r_d2 * _cse0;
                                _lane1[_j1] += -(_r_d2 * _cse0);
                            }
                        }
                        for (int s = _ib1; s < t + 1; ++s) {
                            _d_att[w - att + s] += _d_sum;
                            T _r_d2 = _d_att[w - att + s];
                            _d_att[w - att + s] = 0;
                            const T _cse0 = std::exp(pre[s] - mx);
                            _d_preatt[pre - preatt + s] += _r_d2 * _cse0;
                            _d_mx += -(_r_d2 * _cse0);
                        }
                        for (int _j1 = 0; _j1 < 16; ++_j1) {
                            _d_mx += _lane1[_j1];
                        }
                    }
                } else {
                    for (int s = t + 1; s-- > 0; ) {
                        _d_att[w - att + s] += _d_sum;
                        T _r_d2 = _d_att[w - att + s];
                        _d_att[w - att + s] = 0;
                        w[s] = _tape.pop<T>();
                        const T _cse0 = std::exp(pre[s] - mx);
                        _d_preatt[pre - preatt + s] += _r_d2 * _cse0;
                        _d_mx += -(_r_d2 * _cse0);
                    }
                }
                if (_disjoint0) {
                    for (int s = t + 1; s-- > 0; ) {
                        T _d_dot = T(0);
                        T _r_d1 = _d_mx;
                        _d_mx = 0;
                        mx = _tape.pop<T>();
                        if (pre[s] > mx) {
                            _d_preatt[pre - preatt + s] += _r_d1;
                        } else {
                            _d_mx += _r_d1;
                        }
                        T _r_d0 = _d_preatt[pre - preatt + s];
                        _d_preatt[pre - preatt + s] = 0;
                        _d_dot += _r_d0 * scale;
                        for (int i = 0; i < hs; ++i) {
                            _d_inp[base - inp + (t * 3 * C + h * hs + i)] += _d_dot * base[s * 3 * C + C + h * hs + i];
                            _d_inp[base - inp + (s * 3 * C + C + h * hs + i)] += base[t * 3 * C + h * hs + i] * _d_dot;
                        }
                    }
                } else {
                    for (int s = t + 1; s-- > 0; ) {
                        T _d_dot = T(0);
                        T _r_d1 = _d_mx;
                        _d_mx = 0;
                        mx = _tape.pop<T>();
                        if (pre[s] > mx) {
                            _d_preatt[pre - preatt + s] += _r_d1;
                        } else {
                            _d_mx += _r_d1;
                        }
                        T _r_d0 = _d_preatt[pre - preatt + s];
                        _d_preatt[pre - preatt + s] = 0;
                        pre[s] = _tape.pop<T>();
                        _d_dot += _r_d0 * scale;
                        for (int i = 0; i < hs; ++i) {
                            _d_inp[base - inp + (t * 3 * C + h * hs + i)] += _d_dot * base[s * 3 * C + C + h * hs + i];
                            _d_inp[base - inp + (s * 3 * C + C + h * hs + i)] += base[t * 3 * C + h * hs + i] * _d_dot;
                        }
                    }
                }
            }
        }
    }
}

template <typename T>
void attention_forward_t_reverse_forw(T* out, T* preatt, T* att, const T* inp, int B, int L, int C, int NH, torchclad::Tape& _tape) {
    bool _disjoint0 = (long)L >= 0 && (long)L * (long)L >= 0 && (long)L * (long)L * (long)NH >= 0;
    int hs = C / NH;
    T scale = T(1) / std::sqrt(T(hs));
    for (int b = 0; b < B; ++b) {
        const T* base = inp + b * L * 3 * C;
        for (int h = 0; h < NH; ++h) {
            for (int t = 0; t < L; ++t) {
                T* pre = preatt + ((b * NH + h) * L + t) * L;
                T* w = att + ((b * NH + h) * L + t) * L;
                T mx = T(-1e4);
                if (_disjoint0) {
                    for (int s = 0; s <= t; ++s) {
                        T dot = 0;
                        for (int i = 0; i < hs; ++i) {
                            dot += base[t * 3 * C + h * hs + i] * base[s * 3 * C + C + h * hs + i];
                        }
                        pre[s] = dot * scale;
                        _tape.push(mx);
                        mx = pre[s] > mx ? pre[s] : mx;
                    }
                } else {
                    for (int s = 0; s <= t; ++s) {
                        T dot = 0;
                        for (int i = 0; i < hs; ++i) {
                            dot += base[t * 3 * C + h * hs + i] * base[s * 3 * C + C + h * hs + i];
                        }
                        _tape.push(pre[s]);
                        pre[s] = dot * scale;
                        _tape.push(mx);
                        mx = pre[s] > mx ? pre[s] : mx;
                    }
                }
                T sum = 0;
                if (_disjoint0) {
                    for (int s = 0; s <= t; ++s) {
                        w[s] = std::exp(pre[s] - mx);
                        sum += w[s];
                    }
                } else {
                    for (int s = 0; s <= t; ++s) {
                        _tape.push(w[s]);
                        w[s] = std::exp(pre[s] - mx);
                        sum += w[s];
                    }
                }
                if (_disjoint0) {
                    for (int s = 0; s <= t; ++s) {
                        w[s] = w[s] / sum;
                    }
                } else {
                    for (int s = 0; s <= t; ++s) {
                        _tape.push(w[s]);
                        w[s] = w[s] / sum;
                    }
                }
                if (_disjoint0) {
                    for (int s = t + 1; s < L; ++s) {
                        w[s] = 0;
                    }
                } else {
                    for (int s = t + 1; s < L; ++s) {
                        _tape.push(w[s]);
                        w[s] = 0;
                    }
                }
                T* o = out + (b * L + t) * C + h * hs;
                for (int i = 0; i < hs; ++i) {
                    T acc = 0;
                    for (int s = 0; s <= t; ++s) {
                        acc += w[s] * base[s * 3 * C + 2 * C + h * hs + i];
                    }
                    o[i] = acc;
                }
                _tape.push(mx);
                _tape.push(sum);
            }
        }
    }
}

template <typename T>
void attention_forward_t_reverse_sweep(T* out, T* preatt, T* att, const T* inp, int B, int L, int C, int NH, T* _d_out, T* _d_preatt, T* _d_att, T* _d_inp, torchclad::Tape& _tape) {
    bool _disjoint0 = (long)L >= 0 && (long)L * (long)L >= 0 && (long)L * (long)L * (long)NH >= 0;
    int hs = C / NH;
    T scale = T(1) / std::sqrt(T(hs));
    for (int b = B; b-- > 0; ) {
        const T* base = inp + b * L * 3 * C;
        for (int h = NH; h-- > 0; ) {
            for (int t = L; t-- > 0; ) {
                T sum = _tape.pop<T>();
                T mx = _tape.pop<T>();
                T* pre = preatt + ((b * NH + h) * L + t) * L;
                T* w = att + ((b * NH + h) * L + t) * L;
                T* o = out + (b * L + t) * C + h * hs;
                T _d_mx = T(0);
                T _d_sum = T(0);
                for (int i = 0; i < hs; ++i) {
                    T _d_acc = T(0);
                    T _r_d4 = _d_out[o - out + i];
                    _d_out[o - out + i] = 0;
                    _d_acc += _r_d4;
                    for (int s = 0; s < t + 1; ++s) {
                        _d_att[w - att + s] += _d_acc * base[s * 3 * C + 2 * C + h * hs + i];
                        _d_inp[base - inp + (s * 3 * C + 2 * C + h * hs + i)] += w[s] * _d_acc;
                    }
                }
                if (_disjoint0) {
                    for (int s = t + 1; s < L; ++s) {
                        _d_att[w - att + s] = 0;
                    }
                } else {
                    for (int s = L; s-- > (t + 1); ) {
                        _d_att[w - att + s] = 0;
                        w[s] = _tape.pop<T>();
                    }
                }
                if (_disjoint0) {
                    {
                        T _lane0[16] = {};
                        int _ib0 = 0;
                        for (; _ib0 + 16 <= t + 1; _ib0 += 16) {
                            #pragma omp simd
                            for (int _j0 = 0; _j0 < 16; ++_j0) {
                                int s = _ib0 + _j0;
                                T _r_d3 = _d_att[w - att + s];
                                _d_att[w - att + s] = 0;
                                _lane0[_j0] += -_r_d3 * w[s] / sum;
                                _d_att[w - att + s] += _r_d3 / sum;
                            }
                        }
                        for (int s = _ib0; s < t + 1; ++s) {
                            T _r_d3 = _d_att[w - att + s];
                            _d_att[w - att + s] = 0;
                            _d_sum += -_r_d3 * w[s] / sum;
                            _d_att[w - att + s] += _r_d3 / sum;
                        }
                        for (int _j0 = 0; _j0 < 16; ++_j0) {
                            _d_sum += _lane0[_j0];
                        }
                    }
                } else {
                    for (int s = t + 1; s-- > 0; ) {
                        T _r_d3 = _d_att[w - att + s];
                        _d_att[w - att + s] = 0;
                        _d_sum += -_r_d3 * w[s] / sum;
                        w[s] = _tape.pop<T>();
                        _d_att[w - att + s] += _r_d3 / sum;
                    }
                }
                if (_disjoint0) {
                    {
                        T _lane1[16] = {};
                        int _ib1 = 0;
                        for (; _ib1 + 16 <= t + 1; _ib1 += 16) {
                            #pragma omp simd
                            for (int _j1 = 0; _j1 < 16; ++_j1) {
                                int s = _ib1 + _j1;
                                _d_att[w - att + s] += _d_sum;
                                T _r_d2 = _d_att[w - att + s];
                                _d_att[w - att + s] = 0;
                                const T _cse0 = std::exp(pre[s] - mx);
                                _d_preatt[pre - preatt + s] += _r_d2 * _cse0;
                                _lane1[_j1] += -(_r_d2 * _cse0);
                            }
                        }
                        for (int s = _ib1; s < t + 1; ++s) {
                            _d_att[w - att + s] += _d_sum;
                            T _r_d2 = _d_att[w - att + s];
                            _d_att[w - att + s] = 0;
                            const T _cse0 = std::exp(pre[s] - mx);
                            _d_preatt[pre - preatt + s] += _r_d2 * _cse0;
                            _d_mx += -(_r_d2 * _cse0);
                        }
                        for (int _j1 = 0; _j1 < 16; ++_j1) {
                            _d_mx += _lane1[_j1];
                        }
                    }
                } else {
                    for (int s = t + 1; s-- > 0; ) {
                        _d_att[w - att + s] += _d_sum;
                        T _r_d2 = _d_att[w - att + s];
                        _d_att[w - att + s] = 0;
                        w[s] = _tape.pop<T>();
                        const T _cse0 = std::exp(pre[s] - mx);
                        _d_preatt[pre - preatt + s] += _r_d2 * _cse0;
                        _d_mx += -(_r_d2 * _cse0);
                    }
                }
                if (_disjoint0) {
                    for (int s = t + 1; s-- > 0; ) {
                        T _d_dot = T(0);
                        T _r_d1 = _d_mx;
                        _d_mx = 0;
                        mx = _tape.pop<T>();
                        if (pre[s] > mx) {
                            _d_preatt[pre - preatt + s] += _r_d1;
                        } else {
                            _d_mx += _r_d1;
                        }
                        T _r_d0 = _d_preatt[pre - preatt + s];
                        _d_preatt[pre - preatt + s] = 0;
                        _d_dot += _r_d0 * scale;
                        for (int i = 0; i < hs; ++i) {
                            _d_inp[base - inp + (t * 3 * C + h * hs + i)] += _d_dot * base[s * 3 * C + C + h * hs + i];
                            _d_inp[base - inp + (s * 3 * C + C + h * hs + i)] += base[t * 3 * C + h * hs + i] * _d_dot;
                        }
                    }
                } else {
                    for (int s = t + 1; s-- > 0; ) {
                        T _d_dot = T(0);
                        T _r_d1 = _d_mx;
                        _d_mx = 0;
                        mx = _tape.pop<T>();
                        if (pre[s] > mx) {
                            _d_preatt[pre - preatt + s] += _r_d1;
                        } else {
                            _d_mx += _r_d1;
                        }
                        T _r_d0 = _d_preatt[pre - preatt + s];
                        _d_preatt[pre - preatt + s] = 0;
                        pre[s] = _tape.pop<T>();
                        _d_dot += _r_d0 * scale;
                        for (int i = 0; i < hs; ++i) {
                            _d_inp[base - inp + (t * 3 * C + h * hs + i)] += _d_dot * base[s * 3 * C + C + h * hs + i];
                            _d_inp[base - inp + (s * 3 * C + C + h * hs + i)] += base[t * 3 * C + h * hs + i] * _d_dot;
                        }
                    }
                }
            }
        }
    }
}
