void crossentropy_forward_d_pullback(double* losses, const double* logits, const int* targets, int B, int T, int V, double* _d_losses, double* _d_logits) {
    torchclad::Tape _tape;
    for (int b = 0; b < B; ++b) {
        for (int t = 0; t < T; ++t) {
            const double* z = logits + b * T * V + t * V;
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
            double se = 0.0;
            for (int j = 0; j < V; ++j) {
                se += std::exp(z[j] - mx);
            }
            losses[b * T + t] = mx + std::log(se) - z[targets[b * T + t]];
            _tape.push(mx);
            _tape.push(_at0);
            _tape.push(se);
        }
    }
    for (int b = B; b-- > 0; ) {
        for (int t = T; t-- > 0; ) {
            double se = _tape.pop<double>();
            int _at0 = _tape.pop<int>();
            double mx = _tape.pop<double>();
            const double* z = logits + b * T * V + t * V;
            double _d_mx = double(0);
            double _d_se = double(0);
            double _r_d1 = _d_losses[b * T + t];
            _d_losses[b * T + t] = 0;
            _d_mx += _r_d1;
            _d_se += _r_d1 / se;
            _d_logits[z - logits + targets[b * T + t]] += -_r_d1;
            {
                double _lane0[16] = {};
                int _ib0 = 0;
                for (; _ib0 + 16 <= V; _ib0 += 16) {
                    #pragma omp simd
                    for (int _j0 = 0; _j0 < 16; ++_j0) {
                        int j = _ib0 + _j0;
                        const double _cse0 = std::exp(z[j] - mx);
                        _d_logits[z - logits + j] += _d_se * _cse0;
                        _lane0[_j0] += -(_d_se * _cse0);
                    }
                }
                for (int j = _ib0; j < V; ++j) {
                    const double _cse0 = std::exp(z[j] - mx);
                    _d_logits[z - logits + j] += _d_se * _cse0;
                    _d_mx += -(_d_se * _cse0);
                }
                for (int _j0 = 0; _j0 < 16; ++_j0) {
                    _d_mx += _lane0[_j0];
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
}

void crossentropy_forward_d_reverse_forw(double* losses, const double* logits, const int* targets, int B, int T, int V, torchclad::Tape& _tape) {
    for (int b = 0; b < B; ++b) {
        for (int t = 0; t < T; ++t) {
            const double* z = logits + b * T * V + t * V;
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
            double se = 0.0;
            for (int j = 0; j < V; ++j) {
                se += std::exp(z[j] - mx);
            }
            losses[b * T + t] = mx + std::log(se) - z[targets[b * T + t]];
            _tape.push(mx);
            _tape.push(_at0);
            _tape.push(se);
        }
    }
}

void crossentropy_forward_d_reverse_sweep(double* losses, const double* logits, const int* targets, int B, int T, int V, double* _d_losses, double* _d_logits, torchclad::Tape& _tape) {
    for (int b = B; b-- > 0; ) {
        for (int t = T; t-- > 0; ) {
            double se = _tape.pop<double>();
            int _at0 = _tape.pop<int>();
            double mx = _tape.pop<double>();
            const double* z = logits + b * T * V + t * V;
            double _d_mx = double(0);
            double _d_se = double(0);
            double _r_d1 = _d_losses[b * T + t];
            _d_losses[b * T + t] = 0;
            _d_mx += _r_d1;
            _d_se += _r_d1 / se;
            _d_logits[z - logits + targets[b * T + t]] += -_r_d1;
            {
                double _lane0[16] = {};
                int _ib0 = 0;
                for (; _ib0 + 16 <= V; _ib0 += 16) {
                    #pragma omp simd
                    for (int _j0 = 0; _j0 < 16; ++_j0) {
                        int j = _ib0 + _j0;
                        const double _cse0 = std::exp(z[j] - mx);
                        _d_logits[z - logits + j] += _d_se * _cse0;
                        _lane0[_j0] += -(_d_se * _cse0);
                    }
                }
                for (int j = _ib0; j < V; ++j) {
                    const double _cse0 = std::exp(z[j] - mx);
                    _d_logits[z - logits + j] += _d_se * _cse0;
                    _d_mx += -(_d_se * _cse0);
                }
                for (int _j0 = 0; _j0 < 16; ++_j0) {
                    _d_mx += _lane0[_j0];
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
}

void crossentropy_forward_d_reverse_sweep_assign(double* losses, const double* logits, const int* targets, int B, int T, int V, double* _d_losses, double* _d_logits, torchclad::Tape& _tape) {
    for (int b = B; b-- > 0; ) {
        for (int t = T; t-- > 0; ) {
            double se = _tape.pop<double>();
            int _at0 = _tape.pop<int>();
            double mx = _tape.pop<double>();
            const double* z = logits + b * T * V + t * V;
            double _d_mx = double(0);
            double _d_se = double(0);
            double _r_d1 = _d_losses[b * T + t];
            _d_mx += _r_d1;
            _d_se += _r_d1 / se;
            _d_logits[z - logits + targets[b * T + t]] += -_r_d1;
            {
                double _lane0[16] = {};
                int _ib0 = 0;
                for (; _ib0 + 16 <= V; _ib0 += 16) {
                    #pragma omp simd
                    for (int _j0 = 0; _j0 < 16; ++_j0) {
                        int j = _ib0 + _j0;
                        const double _cse0 = std::exp(z[j] - mx);
                        _d_logits[z - logits + j] += _d_se * _cse0;
                        _lane0[_j0] += -(_d_se * _cse0);
                    }
                }
                for (int j = _ib0; j < V; ++j) {
                    const double _cse0 = std::exp(z[j] - mx);
                    _d_logits[z - logits + j] += _d_se * _cse0;
                    _d_mx += -(_d_se * _cse0);
                }
                for (int _j0 = 0; _j0 < 16; ++_j0) {
                    _d_mx += _lane0[_j0];
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
}
