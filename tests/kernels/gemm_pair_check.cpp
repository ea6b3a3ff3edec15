// matmul_gemm_pair (csrc/kernels/matmul.cpp): two GEMMs sharing the OpenMP threads give what
// the two calls one after the other give, and two that touch the same memory run one after
// the other. Built and run by test_gemm_pair.py with TORCHCLAD_SGEMM_LIB set to numpy's
// OpenBLAS and OMP_NUM_THREADS = 2 or 3; prints OK or what differed.
#include <cmath>
#include <cstdio>
#include <vector>

// matmul.cpp declares MKL's Fortran GEMMs (torch's libtorch_cpu); not linked here: plain loops,
// column-major, used only where the other BLAS is not (never, when it loads)
extern "C" void sgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k,
                       const float* alpha, const float* a, const int* lda, const float* b,
                       const int* ldb, const float* beta, float* c, const int* ldc) {
    for (int j = 0; j < *n; j++) {
        for (int i = 0; i < *m; i++) {
            float s = 0;
            for (int p = 0; p < *k; p++) {
                const float x = *ta == 'T' ? a[p + i * *lda] : a[i + p * *lda];
                const float y = *tb == 'T' ? b[j + p * *ldb] : b[p + j * *ldb];
                s += x * y;
            }
            c[i + j * *ldc] = *alpha * s + (*beta == 0 ? 0 : *beta * c[i + j * *ldc]);
        }
    }
}
extern "C" void dgemm_(const char*, const char*, const int*, const int*, const int*,
                       const double*, const double*, const int*, const double*, const int*,
                       const double*, double*, const int*) {}

#include "../../csrc/kernels/matmul.cpp"

static int failures = 0;

static void expect(bool ok, const char* what) {
    if (!ok) {
        std::printf("FAIL %s\n", what);
        failures++;
    }
}

// c (m x n, column-major, ldc = m) += a (m x k) b (k x n), in double: the reference
static void reference(const std::vector<float>& a, const std::vector<float>& b, std::vector<double>& c,
                      long m, long n, long k) {
    for (long j = 0; j < n; j++)
        for (long i = 0; i < m; i++) {
            double s = 0;
            for (long p = 0; p < k; p++) s += double(a[i + p * m]) * b[p + j * k];
            c[i + j * m] += s;
        }
}

static bool close(const std::vector<float>& got, const std::vector<double>& want) {
    for (size_t i = 0; i < got.size(); i++)
        if (std::fabs(got[i] - want[i]) > 1e-3 * (1 + std::fabs(want[i]))) return false;
    return true;
}

int main() {
    expect(matmul_other_blas().sgemm != nullptr, "the other BLAS did not load");
    const long m = 96, n = 300, k = 200;   // each product over MATMUL_SPLIT_WORK
    std::vector<float> a1(m * k), b1(k * n), a2(m * k), b2(k * n);
    for (long i = 0; i < m * k; i++) { a1[i] = float((i * 7) % 13) / 13 - 0.5f; a2[i] = float((i * 5) % 11) / 11 - 0.5f; }
    for (long i = 0; i < k * n; i++) { b1[i] = float((i * 3) % 17) / 17 - 0.5f; b2[i] = float((i * 11) % 19) / 19 - 0.5f; }

    // disjoint outputs, accumulating: both products in parallel
    std::vector<float> c1(m * n, 1.0f), c2(m * n, -1.0f);
    matmul_gemm_args<float> g1{false, false, m, n, k, 1.0f, a1.data(), m, b1.data(), k, 1.0f, c1.data(), m};
    matmul_gemm_args<float> g2{false, false, m, n, k, 1.0f, a2.data(), m, b2.data(), k, 1.0f, c2.data(), m};
    expect(!matmul_gemm_overlap(g1, g2), "disjoint products reported overlapping");
    matmul_gemm_pair(g1, g2);
    std::vector<double> w1(m * n, 1.0), w2(m * n, -1.0);
    reference(a1, b1, w1, m, n, k);
    reference(a2, b2, w2, m, n, k);
    expect(close(c1, w1) && close(c2, w2), "disjoint pair differs from the reference");

    // one output for both (the d input and d weight of matmul_forward(out, x, x, ...)): one
    // after the other, both added in
    std::vector<float> c(m * n, 0.5f);
    g1.c = c.data();
    g2.c = c.data();
    expect(matmul_gemm_overlap(g1, g2), "one shared output not seen");
    matmul_gemm_pair(g1, g2);
    std::vector<double> w(m * n, 0.5);
    reference(a1, b1, w, m, n, k);
    reference(a2, b2, w, m, n, k);
    expect(close(c, w), "shared output lost an update");

    // the second reads what the first writes (c = a1 b1, then d = c b3): one after the other,
    // or the second would read c's old values (1000s, far off the right d)
    std::vector<float> cc(m * n, 1000.0f), b3(n * k), d(m * k, 0.0f);
    for (long i = 0; i < n * k; i++) b3[i] = float((i * 13) % 23) / 23 - 0.5f;
    matmul_gemm_args<float> h1{false, false, m, n, k, 1.0f, a1.data(), m, b1.data(), k, 0.0f, cc.data(), m};
    matmul_gemm_args<float> h2{false, false, m, k, n, 1.0f, cc.data(), m, b3.data(), n, 0.0f, d.data(), m};
    expect(matmul_gemm_overlap(h1, h2), "an input written by the other product not seen");
    matmul_gemm_pair(h1, h2);
    std::vector<double> wc(m * n, 0.0), wd(m * k, 0.0);
    reference(a1, b1, wc, m, n, k);
    std::vector<float> cf(wc.begin(), wc.end());
    reference(cf, b3, wd, m, k, n);
    expect(close(cc, wc) && close(d, wd), "the second product read the first's output early");

    // interleaved slices of one array (ldc = 2m, offsets 0 and m) count as overlapping; an
    // output that is the other product's input too
    std::vector<float> big(2 * m * n);
    g1.c = big.data(); g1.ldc = 2 * m;
    g2.c = big.data() + m; g2.ldc = 2 * m;
    expect(matmul_gemm_overlap(g1, g2), "interleaved outputs not seen");
    g2.c = c2.data(); g2.ldc = m;
    g1.c = const_cast<float*>(g2.b) + 10; g1.ldc = m;
    expect(matmul_gemm_overlap(g1, g2), "an output that the other product reads not seen");
    if (failures == 0) std::printf("OK\n");
    return failures == 0 ? 0 : 1;
}
