template <typename T>
void tmpl_axpby_pullback(const T* x, T* y, T a, T b, int n, T* _d_x, T* _d_y, T* _d_a, T* _d_b) {
    torchclad::Tape _tape;
    for (int i = 0; i < n; ++i) {
        _tape.push(y[i]);
        y[i] = a * x[i] + b * y[i];
    }
    T _acc0 = T(0);
    T _acc1 = T(0);
    for (int i = n; i-- > 0; ) {
        T _r_d0 = _d_y[i];
        _d_y[i] = 0;
        y[i] = _tape.pop<T>();
        _acc0 += _r_d0 * x[i];
        _d_x[i] += a * _r_d0;
        _acc1 += _r_d0 * y[i];
        _d_y[i] += b * _r_d0;
    }
    if (_acc0 != T(0)) {
        *_d_a += _acc0;
    }
    if (_acc1 != T(0)) {
        *_d_b += _acc1;
    }
}

template <typename T>
void tmpl_axpby_reverse_forw(const T* x, T* y, T a, T b, int n, torchclad::Tape& _tape) {
    for (int i = 0; i < n; ++i) {
        _tape.push(y[i]);
        y[i] = a * x[i] + b * y[i];
    }
}

template <typename T>
void tmpl_axpby_reverse_sweep(const T* x, T* y, T a, T b, int n, T* _d_x, T* _d_y, T* _d_a, T* _d_b, torchclad::Tape& _tape) {
    T _acc0 = T(0);
    T _acc1 = T(0);
    for (int i = n; i-- > 0; ) {
        T _r_d0 = _d_y[i];
        _d_y[i] = 0;
        y[i] = _tape.pop<T>();
        _acc0 += _r_d0 * x[i];
        _d_x[i] += a * _r_d0;
        _acc1 += _r_d0 * y[i];
        _d_y[i] += b * _r_d0;
    }
    if (_acc0 != T(0)) {
        *_d_a += _acc0;
    }
    if (_acc1 != T(0)) {
        *_d_b += _acc1;
    }
}
