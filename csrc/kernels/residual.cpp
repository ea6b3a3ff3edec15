// Residual connection, llm.c style (our own code).
//
// B = batch, T = time, C = channels; elementwise, so the kernel sees N = B * T * C.
//
// void residual_forward(T* out, const T* inp1, const T* inp2, int N)
//   inp1 (N), inp2 (N) -> out (N),  out = inp1 + inp2.  Differentiated w.r.t. inp1, inp2.
//   OpenMP-parallel, forward and generated reverse alike.
template <typename T>
void residual_forward(T* out, const T* inp1, const T* inp2, int N) {
    #pragma omp parallel for
    for (int i = 0; i < N; i++) out[i] = inp1[i] + inp2[i];
}
