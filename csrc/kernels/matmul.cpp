// Matrix multiply plus bias (the Linear layer), through BLAS; our own code, llm.c style.
//
// B = batch, T = time, C = input channels, OC = output channels; rows flattened: BT = B * T.
//
// void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int BT, int C, int OC)
//   inp (BT, C), weight (OC, C) (torch.nn.Linear's layout), bias (OC) or nullptr -> out (BT, OC)
//   out = inp @ weight^T + bias
//
// Derivative: the ONE hand-written derivative in torchclad, csrc/custom/matmul.cpp
// (clad::custom_derivatives::matmul_forward_pullback, also BLAS). The engine looks custom
// derivatives up before differentiating a body, so this body (which calls BLAS) is never
// differentiated; the split-mode pair it emits is reverse_forw = this function, reverse_sweep =
// the custom pullback. The translation unit is this file followed by csrc/custom/matmul.cpp
// (KernelSpec.sources in torchclad/builtin/registry.py).
//
// BLAS: the Fortran sgemm_ / dgemm_ that torch's libtorch_cpu.so exports (MKL), declared here;
// the extension links against libtorch_cpu.so (KernelSpec.libraries = ("torch_cpu",)). Fortran
// BLAS is column-major: a row-major (R, K) array is the column-major (K, R) matrix, its
// transpose, which is how the calls below read.
extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n,
                       const int* k, const float* alpha, const float* a, const int* lda,
                       const float* b, const int* ldb, const float* beta, float* c, const int* ldc);
extern "C" void dgemm_(const char* transa, const char* transb, const int* m, const int* n,
                       const int* k, const double* alpha, const double* a, const int* lda,
                       const double* b, const int* ldb, const double* beta, double* c,
                       const int* ldc);

// Column-major c (m x n) = alpha * op(a) * op(b) + beta * c, op = transpose when ta / tb.
inline void matmul_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a,
                        int lda, const float* b, int ldb, float beta, float* c, int ldc) {
    sgemm_(ta ? "T" : "N", tb ? "T" : "N", &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc);
}

inline void matmul_gemm(bool ta, bool tb, int m, int n, int k, double alpha, const double* a,
                        int lda, const double* b, int ldb, double beta, double* c, int ldc) {
    dgemm_(ta ? "T" : "N", tb ? "T" : "N", &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc);
}

template <typename T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int BT, int C, int OC) {
    if (BT <= 0 || OC <= 0) return;
    for (int i = 0; i < BT; i++) {
        T* o = out + i * OC;
        for (int j = 0; j < OC; j++) o[j] = bias != nullptr ? bias[j] : T(0);
    }
    if (C <= 0) return;
    // out^T (OC, BT) += weight (OC, C) . inp^T (C, BT); weight is the column-major (C, OC)
    // matrix, used transposed.
    matmul_gemm(true, false, OC, BT, C, T(1), weight, C, inp, C, T(1), out, OC);
}
