template <typename T>
void gelu_forward_pullback(T* out, const T* inp, int N, T* _d_inp, T* _d_out) {
    #pragma omp parallel for schedule(static, torchclad::elementwise_chunk(N))
    for (int i = 0; i < N; ++i) {
        T x = inp[i];
        T cube = T(0.044715) * x * x * x;
        out[i] = T(0.5) * x * (T(1) + std::tanh(T(0.7978845608028654) * (x + cube)));
    }
    #pragma omp parallel for schedule(static, torchclad::elementwise_chunk(N))
    for (int i = 0; i < N; ++i) {
        T x = inp[i];
        T cube = T(0.044715) * x * x * x;
        T _d_x = T(0);
        T _d_cube = T(0);
        T _r_d0 = _d_out[i];
        _d_out[i] = 0;
        const T _cse0 = std::tanh(T(0.7978845608028654) * (x + cube));
        _d_x += T(0.5) * (_r_d0 * (T(1) + _cse0));
        _d_x += T(0.7978845608028654) * ((T(0.5) * x * _r_d0) * ::torchclad::rt::d_tanh(_cse0));
        _d_cube += T(0.7978845608028654) * ((T(0.5) * x * _r_d0) * ::torchclad::rt::d_tanh(_cse0));
        _d_x += T(3) * (_d_cube * (T(0.044715) * x * x));
        _d_inp[i] += _d_x;
    }
}

template <typename T>
void gelu_forward_reverse_forw(T* out, const T* inp, int N, torchclad::Tape& _tape) {
    #pragma omp parallel for schedule(static, torchclad::elementwise_chunk(N))
    for (int i = 0; i < N; ++i) {
        T x = inp[i];
        T cube = T(0.044715) * x * x * x;
        out[i] = T(0.5) * x * (T(1) + std::tanh(T(0.7978845608028654) * (x + cube)));
    }
}

template <typename T>
void gelu_forward_reverse_sweep(T* out, const T* inp, int N, T* _d_inp, T* _d_out, torchclad::Tape& _tape) {
    #pragma omp parallel for schedule(static, torchclad::elementwise_chunk(N))
    for (int i = 0; i < N; ++i) {
        T x = inp[i];
        T cube = T(0.044715) * x * x * x;
        T _d_x = T(0);
        T _d_cube = T(0);
        T _r_d0 = _d_out[i];
        _d_out[i] = 0;
        const T _cse0 = std::tanh(T(0.7978845608028654) * (x + cube));
        _d_x += T(0.5) * (_r_d0 * (T(1) + _cse0));
        _d_x += T(0.7978845608028654) * ((T(0.5) * x * _r_d0) * ::torchclad::rt::d_tanh(_cse0));
        _d_cube += T(0.7978845608028654) * ((T(0.5) * x * _r_d0) * ::torchclad::rt::d_tanh(_cse0));
        _d_x += T(3) * (_d_cube * (T(0.044715) * x * x));
        _d_inp[i] += _d_x;
    }
}

template <typename T>
void gelu_forward_reverse_sweep_assign(T* out, const T* inp, int N, T* _d_inp, T* _d_out, torchclad::Tape& _tape) {
    #pragma omp parallel for schedule(static, torchclad::elementwise_chunk(N))
    for (int i = 0; i < N; ++i) {
        T x = inp[i];
        T cube = T(0.044715) * x * x * x;
        T _d_x = T(0);
        T _d_cube = T(0);
        T _r_d0 = _d_out[i];
        const T _cse0 = std::tanh(T(0.7978845608028654) * (x + cube));
        _d_x += T(0.5) * (_r_d0 * (T(1) + _cse0));
        _d_x += T(0.7978845608028654) * ((T(0.5) * x * _r_d0) * ::torchclad::rt::d_tanh(_cse0));
        _d_cube += T(0.7978845608028654) * ((T(0.5) * x * _r_d0) * ::torchclad::rt::d_tanh(_cse0));
        _d_x += T(3) * (_d_cube * (T(0.044715) * x * x));
        _d_inp[i] = _d_x;
    }
}
