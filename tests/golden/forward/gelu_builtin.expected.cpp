template <typename T>
void gelu_forward_pushforward(T* out, const T* inp, int N, T* _d_out, const T* _d_inp) {
    #pragma omp parallel for schedule(static, torchclad::elementwise_chunk(N))
    for (int i = 0; i < N; ++i) {
        T _d_x = _d_inp[i];
        T x = inp[i];
        T _d_cube = (T(0.044715) * _d_x * x + T(0.044715) * x * _d_x) * x + T(0.044715) * x * x * _d_x;
        T cube = T(0.044715) * x * x * x;
        const T _cse0 = std::tanh(T(0.7978845608028654) * (x + cube));
        _d_out[i] = T(0.5) * _d_x * (T(1) + _cse0) + T(0.5) * x * (T(0.7978845608028654) * (_d_x + _d_cube) * ::torchclad::rt::d_tanh(_cse0));
        out[i] = T(0.5) * x * (T(1) + _cse0);
    }
}
