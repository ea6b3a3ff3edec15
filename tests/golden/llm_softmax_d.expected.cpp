void softmax_forward_d_pullback(double* probs, const double* logits, int N, int V, double* _d_probs, double* _d_logits) {
    torchclad::Tape _tape;
    bool _disjoint0 = (long)V >= 0;
    for (int r = 0; r < N; ++r) {
        const double* z = logits + r * V;
        double* p = probs + r * V;
        double mx = z[0];
        double _v0 = mx;
        bool _took0 = false;
        int _at0 = int(0);
        for (int j = 1; j < V; ++j) {
            if (z[j] > _v0) {
                _v0 = z[j];
                _took0 = true;
                _at0 = j;
            }
        }
        bool _t0 = _took0;
        if (_t0) {
            mx = z[_at0];
        }
        _tape.push(_t0);
        double sum = 0.0;
        if (_disjoint0) {
            for (int j = 0; j < V; ++j) {
                p[j] = std::exp(z[j] - mx);
                sum += p[j];
            }
        } else {
            for (int j = 0; j < V; ++j) {
                _tape.push(p[j]);
                p[j] = std::exp(z[j] - mx);
                sum += p[j];
            }
        }
        double inv = 1.0 / sum;
        for (int j = 0; j < V; ++j) {
            _tape.push(p[j]);
            p[j] = p[j] * inv;
        }
        _tape.push(mx);
        _tape.push(_at0);
        _tape.push(sum);
    }
    for (int r = N; r-- > 0; ) {
        double sum = _tape.pop<double>();
        int _at0 = _tape.pop<int>();
        double mx = _tape.pop<double>();
        const double* z = logits + r * V;
        double* p = probs + r * V;
        double inv = 1.0 / sum;
        double _d_mx = double(0);
        double _d_sum = double(0);
        double _d_inv = double(0);
        for (int j = V; j-- > 0; ) {
            double _r_d2 = _d_probs[p - probs + j];
            _d_probs[p - probs + j] = 0;
            p[j] = _tape.pop<double>();
            _d_probs[p - probs + j] += _r_d2 * inv;
            _d_inv += p[j] * _r_d2;
        }
        _d_sum += -_d_inv / (sum * sum);
        if (_disjoint0) {
            {
                double _lane0[16] = {};
                int _ib0 = 0;
                for (; _ib0 + 16 <= V; _ib0 += 16) {
                    #pragma omp simd
                    for (int _j0 = 0; _j0 < 16; ++_j0) {
                        int j = _ib0 + _j0;
                        _d_probs[p - probs + j] += _d_sum;
                        double _r_d1 = _d_probs[p - probs + j];
                        _d_probs[p - probs + j] = 0;
                        const double _cse0 = std::exp(z[j] - mx);
                        _d_logits[z - logits + j] += _r_d1 * _cse0;
                        _lane0[_j0] += -(_r_d1 * _cse0);
                    }
                }
                for (int j = _ib0; j < V; ++j) {
                    _d_probs[p - probs + j] += _d_sum;
                    double _r_d1 = _d_probs[p - probs + j];
                    _d_probs[p - probs + j] = 0;
                    const double _cse0 = std::exp(z[j] - mx);
                    _d_logits[z - logits + j] += _r_d1 * _cse0;
                    _d_mx += -(_r_d1 * _cse0);
                }
                for (int _j0 = 0; _j0 < 16; ++_j0) {
                    _d_mx += _lane0[_j0];
                }
            }
        } else {
            for (int j = V; j-- > 0; ) {
                _d_probs[p - probs + j] += _d_sum;
                double _r_d1 = _d_probs[p - probs + j];
                _d_probs[p - probs + j] = 0;
                p[j] = _tape.pop<double>();
                const double _cse0 = std::exp(z[j] - mx);
                _d_logits[z - logits + j] += _r_d1 * _cse0;
                _d_mx += -(_r_d1 * _cse0);
            }
        }
        if (_tape.pop<bool>()) {
            double _r_d0 = _d_mx;
            _d_mx = 0;
            _d_logits[z - logits + _at0] += _r_d0;
        }
        _d_logits[z - logits] += _d_mx;
    }
}

void softmax_forward_d_reverse_forw(double* probs, const double* logits, int N, int V, torchclad::Tape& _tape) {
    bool _disjoint0 = (long)V >= 0;
    for (int r = 0; r < N; ++r) {
        const double* z = logits + r * V;
        double* p = probs + r * V;
        double mx = z[0];
        double _v0 = mx;
        bool _took0 = false;
        int _at0 = int(0);
        for (int j = 1; j < V; ++j) {
            if (z[j] > _v0) {
                _v0 = z[j];
                _took0 = true;
                _at0 = j;
            }
        }
        bool _t0 = _took0;
        if (_t0) {
            mx = z[_at0];
        }
        _tape.push(_t0);
        double sum = 0.0;
        if (_disjoint0) {
            for (int j = 0; j < V; ++j) {
                p[j] = std::exp(z[j] - mx);
                sum += p[j];
            }
        } else {
            for (int j = 0; j < V; ++j) {
                _tape.push(p[j]);
                p[j] = std::exp(z[j] - mx);
                sum += p[j];
            }
        }
        double inv = 1.0 / sum;
        for (int j = 0; j < V; ++j) {
            _tape.push(p[j]);
            p[j] = p[j] * inv;
        }
        _tape.push(mx);
        _tape.push(_at0);
        _tape.push(sum);
    }
}

void softmax_forward_d_reverse_sweep(double* probs, const double* logits, int N, int V, double* _d_probs, double* _d_logits, torchclad::Tape& _tape) {
    bool _disjoint0 = (long)V >= 0;
    for (int r = N; r-- > 0; ) {
        double sum = _tape.pop<double>();
        int _at0 = _tape.pop<int>();
        double mx = _tape.pop<double>();
        const double* z = logits + r * V;
        double* p = probs + r * V;
        double inv = 1.0 / sum;
        double _d_mx = double(0);
        double _d_sum = double(0);
        double _d_inv = double(0);
        for (int j = V; j-- > 0; ) {
            double _r_d2 = _d_probs[p - probs + j];
            _d_probs[p - probs + j] = 0;
            p[j] = _tape.pop<double>();
            _d_probs[p - probs + j] += _r_d2 * inv;
            _d_inv += p[j] * _r_d2;
        }
        _d_sum += -_d_inv / (sum * sum);
        if (_disjoint0) {
            {
                double _lane0[16] = {};
                int _ib0 = 0;
                for (; _ib0 + 16 <= V; _ib0 += 16) {
                    #pragma omp simd
                    for (int _j0 = 0; _j0 < 16; ++_j0) {
                        int j = _ib0 + _j0;
                        _d_probs[p - probs + j] += _d_sum;
                        double _r_d1 = _d_probs[p - probs + j];
                        _d_probs[p - probs + j] = 0;
                        const double _cse0 = std::exp(z[j] - mx);
                        _d_logits[z - logits + j] += _r_d1 * _cse0;
                        _lane0[_j0] += -(_r_d1 * _cse0);
                    }
                }
                for (int j = _ib0; j < V; ++j) {
                    _d_probs[p - probs + j] += _d_sum;
                    double _r_d1 = _d_probs[p - probs + j];
                    _d_probs[p - probs + j] = 0;
                    const double _cse0 = std::exp(z[j] - mx);
                    _d_logits[z - logits + j] += _r_d1 * _cse0;
                    _d_mx += -(_r_d1 * _cse0);
                }
                for (int _j0 = 0; _j0 < 16; ++_j0) {
                    _d_mx += _lane0[_j0];
                }
            }
        } else {
            for (int j = V; j-- > 0; ) {
                _d_probs[p - probs + j] += _d_sum;
                double _r_d1 = _d_probs[p - probs + j];
                _d_probs[p - probs + j] = 0;
                p[j] = _tape.pop<double>();
                const double _cse0 = std::exp(z[j] - mx);
                _d_logits[z - logits + j] += _r_d1 * _cse0;
                _d_mx += -(_r_d1 * _cse0);
            }
        }
        if (_tape.pop<bool>()) {
            double _r_d0 = _d_mx;
            _d_mx = 0;
            _d_logits[z - logits + _at0] += _r_d0;
        }
        _d_logits[z - logits] += _d_mx;
    }
}
