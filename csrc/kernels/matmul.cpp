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
#include <dlfcn.h>
#include <cstdlib>
#ifdef _OPENMP
#include <omp.h>
#endif

extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n,
                       const int* k, const float* alpha, const float* a, const int* lda,
                       const float* b, const int* ldb, const float* beta, float* c, const int* ldc);
extern "C" void dgemm_(const char* transa, const char* transb, const int* m, const int* n,
                       const int* k, const double* alpha, const double* a, const int* lda,
                       const double* b, const int* ldb, const double* beta, double* c,
                       const int* ldc);

// The float GEMM can come from another BLAS, chosen once per process by torchclad.builtin.blas
// at import (by CPU: numpy's OpenBLAS, where it measured faster than MKL at the models' shapes,
// benchmarks/bench_blas.py): TORCHCLAD_SGEMM_LIB names a library exporting an ILP64 Fortran
// sgemm (numpy's OpenBLAS: scipy_sgemm_64_), loaded on the first call; unset, or not loadable:
// MKL's sgemm_. That library always runs single-threaded: its own thread pool would compete for
// the cores with the OpenMP threads of torch and of the kernels, which spin for a while after
// each parallel region (measured: the fused GPT-2 at 2 threads 2x slower with it). With more
// than one OpenMP thread, a large GEMM is cut into column (or row) blocks of C, one per OpenMP
// thread, each a single-threaded call (matmul_gemm_split): the cores stay OpenMP's, as with
// MKL, which runs on OpenMP's threads.
using matmul_sgemm64_fn = void (*)(const char*, const char*, const long*, const long*,
                                   const long*, const float*, const float*, const long*,
                                   const float*, const long*, const float*, float*, const long*);
using matmul_threads_fn = void (*)(int);

struct matmul_blas {
    matmul_sgemm64_fn sgemm = nullptr;
};

inline matmul_blas matmul_load_blas() {
    matmul_blas out;
    const char* path = std::getenv("TORCHCLAD_SGEMM_LIB");
    void* lib = path != nullptr && *path != 0 ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
    if (lib == nullptr) return out;
    const char* gemms[] = {"scipy_sgemm_64_", "sgemm_64_"};
    const char* sets[] = {"scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_"};
    matmul_threads_fn set_threads = nullptr;
    for (const char* name : gemms) {
        if (out.sgemm == nullptr) out.sgemm = (matmul_sgemm64_fn)dlsym(lib, name);
    }
    for (const char* name : sets) {
        if (set_threads == nullptr) set_threads = (matmul_threads_fn)dlsym(lib, name);
    }
    // its own pool never runs: every call is single-threaded (see above); without the setter
    // the library might start threads of its own, so it is not used
    if (set_threads == nullptr) out.sgemm = nullptr;
    else set_threads(1);
    return out;
}

inline matmul_blas& matmul_other_blas() {
    static matmul_blas blas = matmul_load_blas();
    return blas;
}

inline void matmul_other_call(const matmul_blas& other, bool ta, bool tb, long m, long n, long k,
                              float alpha, const float* a, long lda, const float* b, long ldb,
                              float beta, float* c, long ldc) {
    other.sgemm(ta ? "T" : "N", tb ? "T" : "N", &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c,
                &ldc);
}

// Work (m * n * k multiply-adds) below which a GEMM of the other BLAS is not split over threads
// (~20 us at one core: the parallel region's start and the packing of the shared operand per
// block would eat the gain), and the fewest rows / columns of C a block gets (a multiple of the
// 16-wide register tiles of the AVX2 / AVX-512 kernels).
constexpr long MATMUL_SPLIT_WORK = 1L << 20;
constexpr long MATMUL_SPLIT_ALIGN = 16;

// One GEMM, column-major c (m x n) = alpha op(a) op(b) + beta c, as a list of arguments, so
// that two can be handed to the threads together (matmul_gemm_pair).
template <typename T>
struct matmul_gemm_args {
    bool ta, tb;
    long m, n, k;
    T alpha;
    const T* a;
    long lda;
    const T* b;
    long ldb;
    T beta;
    T* c;
    long ldc;
};

// Block p of `parts` of g, cut along the longer side of c, single-threaded: the columns
// [j0, j1) of c need op(b)'s columns [j0, j1) only (b + j0 * ldb, or b + j0 when b is
// transposed); the rows [i0, i1), op(a)'s rows (a + i0, or a + i0 * lda when transposed).
// Blocks are multiples of MATMUL_SPLIT_ALIGN; a block past the end is empty.
inline void matmul_gemm_block(const matmul_blas& other, const matmul_gemm_args<float>& g,
                              int parts, int p) {
    const bool by_cols = g.n >= g.m;
    const long side = by_cols ? g.n : g.m;
    const long units = (side + MATMUL_SPLIT_ALIGN - 1) / MATMUL_SPLIT_ALIGN;
    const long lo = units * p / parts * MATMUL_SPLIT_ALIGN;
    const long hi_u = units * (p + 1) / parts * MATMUL_SPLIT_ALIGN;
    const long hi = hi_u < side ? hi_u : side;
    if (hi <= lo) return;
    if (by_cols) {
        const float* bj = g.tb ? g.b + lo : g.b + lo * g.ldb;
        matmul_other_call(other, g.ta, g.tb, g.m, hi - lo, g.k, g.alpha, g.a, g.lda, bj, g.ldb,
                          g.beta, g.c + lo * g.ldc, g.ldc);
    } else {
        const float* ai = g.ta ? g.a + lo * g.lda : g.a + lo;
        matmul_other_call(other, g.ta, g.tb, hi - lo, g.n, g.k, g.alpha, ai, g.lda, g.b, g.ldb,
                          g.beta, g.c + lo, g.ldc);
    }
}

// How many blocks of MATMUL_SPLIT_ALIGN the longer side of c has, at most `threads`.
inline int matmul_gemm_parts(const matmul_gemm_args<float>& g, int threads) {
    const long side = g.n >= g.m ? g.n : g.m;
    const long units = (side + MATMUL_SPLIT_ALIGN - 1) / MATMUL_SPLIT_ALIGN;
    return static_cast<int>(units < threads ? units : threads);
}

// Whether one of two GEMMs writes memory the other reads or writes (the column-major spans
// of their matrices overlap; a span is the whole range from the first element to the last, so
// two interleaved slices of one array count as overlapping): then they must run one after the
// other, as written.
inline bool matmul_span_meets(const float* p, long rows, long cols, long ld, const float* q,
                              long qrows, long qcols, long qld) {
    const float* pe = p + (cols - 1) * ld + rows;
    const float* qe = q + (qcols - 1) * qld + qrows;
    return p < qe && q < pe;
}

inline bool matmul_gemm_writes_into(const matmul_gemm_args<float>& w, const matmul_gemm_args<float>& r) {
    return matmul_span_meets(w.c, w.m, w.n, w.ldc, r.c, r.m, r.n, r.ldc) ||
           matmul_span_meets(w.c, w.m, w.n, w.ldc, r.a, r.ta ? r.k : r.m, r.ta ? r.m : r.k,
                             r.lda) ||
           matmul_span_meets(w.c, w.m, w.n, w.ldc, r.b, r.tb ? r.n : r.k, r.tb ? r.k : r.n,
                             r.ldb);
}

inline bool matmul_gemm_overlap(const matmul_gemm_args<float>& g1, const matmul_gemm_args<float>& g2) {
    return matmul_gemm_writes_into(g1, g2) || matmul_gemm_writes_into(g2, g1);
}

// Whether a GEMM is worth splitting over threads (as matmul_gemm decides).
inline bool matmul_gemm_splits(const matmul_gemm_args<float>& g) {
    return g.m * g.n * g.k >= MATMUL_SPLIT_WORK &&
           (g.m > MATMUL_SPLIT_ALIGN || g.n > MATMUL_SPLIT_ALIGN);
}

// Column-major c (m x n) by blocks of its longer side, one block per OpenMP thread, each a
// single-threaded GEMM of the other BLAS (matmul_gemm_block). The result agrees with the
// unsplit call to rounding, mostly bit for bit (over 15552 shapes, transposes and betas at 2
// and 3 blocks, 3% differed, small ones: the library picks its kernels by size), so, like
// MKL's threads, the bits of a split GEMM may depend on the thread count.
inline void matmul_gemm_split(const matmul_blas& other, int threads,
                              const matmul_gemm_args<float>& g) {
    const int parts = matmul_gemm_parts(g, threads);
    #pragma omp parallel for num_threads(parts) schedule(static, 1)
    for (int p = 0; p < parts; p++) matmul_gemm_block(other, g, parts, p);
}

// Column-major c (m x n) = alpha * op(a) * op(b) + beta * c, op = transpose when ta / tb.
// fixed: one call on the calling thread, whatever the thread count, so that a GEMM run on one
// thread of a parallel loop (a batch entry of matmul_strided) gives the same bits at any thread
// count: the other BLAS single-threaded, or MKL, which runs sequentially inside an active
// parallel region and with one thread. Otherwise the other BLAS is split over the OpenMP
// threads (matmul_gemm_split), and MKL uses them itself.
inline void matmul_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a,
                        int lda, const float* b, int ldb, float beta, float* c, int ldc,
                        bool fixed = false) {
    const matmul_blas& other = matmul_other_blas();
    if (other.sgemm != nullptr) {
#ifdef _OPENMP
        const int threads = fixed || omp_in_parallel() ? 1 : omp_get_max_threads();
#else
        const int threads = 1;
#endif
        const matmul_gemm_args<float> g{ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc};
        if (threads > 1 && matmul_gemm_splits(g)) {
            matmul_gemm_split(other, threads, g);
        } else {
            matmul_other_call(other, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        }
        return;
    }
    sgemm_(ta ? "T" : "N", tb ? "T" : "N", &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc);
}

inline void matmul_gemm(bool ta, bool tb, int m, int n, int k, double alpha, const double* a,
                        int lda, const double* b, int ldb, double beta, double* c, int ldc,
                        bool fixed = false) {
    (void)fixed;  // always MKL's
    dgemm_(ta ? "T" : "N", tb ? "T" : "N", &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc);
}

// g through matmul_gemm (its threads and its choice of BLAS).
template <typename T>
void matmul_gemm_run(const matmul_gemm_args<T>& g) {
    matmul_gemm(g.ta, g.tb, static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k),
                g.alpha, g.a, static_cast<int>(g.lda), g.b, static_cast<int>(g.ldb), g.beta, g.c,
                static_cast<int>(g.ldc));
}

// Two independent GEMMs (the d input and the d weight products of one pullback): with the other
// BLAS, more than one OpenMP thread and both large enough to split, the threads are shared out
// between them -- half the blocks each (matmul_gemm_block), all in one parallel loop -- rather
// than running each split over every thread in turn. Each thread then packs a block of one
// product instead of a copy of the operand both halves of a split product read: at two threads
// each product is one single-threaded call, with its one-thread bits. Otherwise (MKL, one
// thread, small products, or products that touch the same memory: matmul_gemm_overlap) one
// matmul_gemm after the other. Measured (C++, numpy's OpenBLAS, AMD EPYC, 2 threads, the demo
// model's four linear layers): both products 1.69-1.97x faster than one thread, against
// 1.50-1.86x for each split in turn.
inline void matmul_gemm_pair(const matmul_gemm_args<float>& g1, const matmul_gemm_args<float>& g2) {
    const matmul_blas& other = matmul_other_blas();
#ifdef _OPENMP
    const int threads = other.sgemm != nullptr && !omp_in_parallel() ? omp_get_max_threads() : 1;
#else
    const int threads = 1;
#endif
    if (threads < 2 || !matmul_gemm_splits(g1) || !matmul_gemm_splits(g2) ||
        matmul_gemm_overlap(g1, g2)) {
        matmul_gemm_run(g1);
        matmul_gemm_run(g2);
        return;
    }
    const int p1 = matmul_gemm_parts(g1, threads / 2);
    const int p2 = matmul_gemm_parts(g2, threads - threads / 2);
    #pragma omp parallel for num_threads(p1 + p2) schedule(static, 1)
    for (int p = 0; p < p1 + p2; p++) {
        if (p < p1) matmul_gemm_block(other, g1, p1, p);
        else matmul_gemm_block(other, g2, p2, p - p1);
    }
}

// The double GEMMs are MKL's, which threads each product itself: one after the other.
inline void matmul_gemm_pair(const matmul_gemm_args<double>& g1,
                             const matmul_gemm_args<double>& g2) {
    matmul_gemm_run(g1);
    matmul_gemm_run(g2);
}

// The strided, batched GEMM every product in the built-in kernels goes through (matmul_forward
// below, the two products of attention_forward), row-major with row strides (leading
// dimensions), for each batch entry (i, j) of an nb x nh grid:
//   out_ij (M, N; row stride ldo) = [out_ij +] alpha * a_ij (M, K; lda) @ op(b_ij)
//   op(b) = b^T with b (N, K; ldb) when tb != 0, else b (K, N; ldb); out += when acc != 0;
//   tri == 1: a_ij is lower triangular (M == K), only its lower part read (matmul_strided_one);
//   tri == 2: only the lower part of out_ij is wanted (M == N: a causal product of scores), by
//   blocks of MATMUL_CAUSAL_BLOCK rows; what lies right of a block's diagonal block is not
//   written (the caller masks it);
//   a_ij = a + i * sa_b + j * sa_h, likewise b_ij (sb_b, sb_h) and out_ij (so_b, so_h).
// With acc == 0, out is only written (BLAS does not read c when beta is 0). One entry
// (nb = nh = 1) is one GEMM with BLAS's threads; more run in parallel, one single-threaded GEMM
// each (matmul_gemm's `fixed`: the same bits at any thread count). The entries' outputs must
// not overlap, nor (for the derivative) the slices of a and of b they read. The derivative is
// hand-written with matmul_forward's, in csrc/custom/matmul.cpp (matmul_strided_pullback ...).
struct matmul_batch {
    int nb, nh, sa_b, sa_h, sb_b, sb_h, so_b, so_h;
    int count() const { return nb * nh; }
    long a(int e) const { return static_cast<long>(e / nh) * sa_b + static_cast<long>(e % nh) * sa_h; }
    long b(int e) const { return static_cast<long>(e / nh) * sb_b + static_cast<long>(e % nh) * sb_h; }
    long o(int e) const { return static_cast<long>(e / nh) * so_b + static_cast<long>(e % nh) * so_h; }
};

// One GEMM of matmul_strided (fixed: see matmul_gemm).
template <typename T>
void matmul_strided_gemm(T* out, const T* a, const T* b, int M, int N, int K, int lda, int ldb,
                         int ldo, int tb, T alpha, int acc, bool fixed) {
    if (K <= 0) {
        if (acc == 0) {
            for (int i = 0; i < M; i++) {
                for (int j = 0; j < N; j++) out[static_cast<long>(i) * ldo + j] = T(0);
            }
        }
        return;
    }
    // out^T (N, M) = op(b)^T (N, K) . a^T (K, M), column-major as stored: a row-major (R, C)
    // array is the column-major (C, R) matrix
    matmul_gemm(tb != 0, false, N, M, K, alpha, b, ldb, a, lda, acc != 0 ? T(1) : T(0), out, ldo,
                fixed);
}

// Rows of a lower-triangular a are taken in blocks of this many: the part left of the diagonal
// block is one GEMM, the diagonal block (s <= t only) plain loops (matmul_tri_sum). 32 rather
// than 16 since those loops keep their sums in registers: half the GEMM calls, each of a few
// microseconds at attention's sizes (the attention op's fwd+bwd ~10% faster at the demo size,
// one thread; the fused demo step 0.96x / 0.98x at 1 / 2 threads, shakespeare-char 0.99x / 0.98x,
// two builds in alternating processes).
constexpr int MATMUL_TRI_BLOCK = 32;

// Rows of a causal product (tri == 2) are taken in blocks of this many: the rows [r0, r1) of out
// get their columns [0, r1) only, one GEMM per block. With T query rows the GEMMs do
// (T / 64 + 1) / (2 T / 64) of the full product's work (62.5% at T = 256; the whole product at
// T <= 64, where nothing changes); smaller blocks would waste less but make GEMMs too small.
constexpr int MATMUL_CAUSAL_BLOCK = 64;

// The columns of out a row block [r0, r1) of a causal product computes (and its pullback reads).
inline int matmul_causal_cols(int r1, int N) { return r1 < N ? r1 : N; }

// The diagonal blocks of a lower-triangular product (tb == 0, b (K, N)) and of its d b:
// out[j] += sum over k in [k0, k1) of alpha * a[k * as] * b[k * ldb + j] for j < N -- one row of
// the product (a row of a, as = 1) or one row of d b (a column of a, as = lda; b = d out). By
// chunks of W columns (64, 32, 16, then one at a time) whose sums stay in registers over the k
// loop and are then added to out: plain loops keeping the sum in out itself (a runtime count of
// columns, out and b possibly aliased as far as g++ knows) ran at about 6 GFLOP/s at the demo
// model's head size 32, one thread, and took 12% of its attention op's fwd+bwd (7% in
// registers, with the row blocks of 16 of that time).
template <int W, typename T>
void matmul_tri_chunk(T* out, const T* a, int as, const T* b, int ldb, int k0, int k1, T alpha) {
    T sum[W];
    for (int j = 0; j < W; j++) sum[j] = T(0);
    for (int k = k0; k < k1; k++) {
        const T s = alpha * a[static_cast<long>(k) * as];
        const T* bk = b + static_cast<long>(k) * ldb;
        for (int j = 0; j < W; j++) sum[j] += s * bk[j];
    }
    for (int j = 0; j < W; j++) out[j] += sum[j];
}

template <typename T>
void matmul_tri_sum(T* out, const T* a, int as, const T* b, int ldb, int k0, int k1, int N,
                    T alpha) {
    int j = 0;
    for (; j + 64 <= N; j += 64) matmul_tri_chunk<64>(out + j, a, as, b + j, ldb, k0, k1, alpha);
    if (j + 32 <= N) {
        matmul_tri_chunk<32>(out + j, a, as, b + j, ldb, k0, k1, alpha);
        j += 32;
    }
    if (j + 16 <= N) {
        matmul_tri_chunk<16>(out + j, a, as, b + j, ldb, k0, k1, alpha);
        j += 16;
    }
    for (; j < N; j++) matmul_tri_chunk<1>(out + j, a, as, b + j, ldb, k0, k1, alpha);
}

// One entry of matmul_strided; tri == 1: a is lower triangular (M == K) and its upper part is
// never read, not even multiplied by 0 (a NaN or Inf in a row of op(b) that only the upper part
// meets stays out of the result: attention's causal product att @ v does not see the future);
// tri == 2: out's lower part only, by row blocks (MATMUL_CAUSAL_BLOCK).
template <typename T>
void matmul_strided_one(T* out, const T* a, const T* b, int M, int N, int K, int lda, int ldb,
                        int ldo, int tb, T alpha, int acc, bool fixed, int tri) {
    if (tri == 0) {
        matmul_strided_gemm(out, a, b, M, N, K, lda, ldb, ldo, tb, alpha, acc, fixed);
        return;
    }
    if (tri == 2) {
        // op(b)'s first r1 columns are b itself with N = r1, whether b is (N, K) or (K, N)
        for (int r0 = 0; r0 < M; r0 += MATMUL_CAUSAL_BLOCK) {
            const int r1 = r0 + MATMUL_CAUSAL_BLOCK < M ? r0 + MATMUL_CAUSAL_BLOCK : M;
            const long ro = static_cast<long>(r0) * ldo, ra = static_cast<long>(r0) * lda;
            matmul_strided_gemm(out + ro, a + ra, b, r1 - r0, matmul_causal_cols(r1, N), K, lda,
                                ldb, ldo, tb, alpha, acc, fixed);
        }
        return;
    }
    for (int r0 = 0; r0 < M; r0 += MATMUL_TRI_BLOCK) {
        const int r1 = r0 + MATMUL_TRI_BLOCK < M ? r0 + MATMUL_TRI_BLOCK : M;
        T* o = out + static_cast<long>(r0) * ldo;
        matmul_strided_gemm(o, a + static_cast<long>(r0) * lda, b, r1 - r0, N, r0, lda, ldb, ldo, tb,
                            alpha, acc, fixed);
        for (int i = r0; i < r1; i++) {
            T* oi = out + static_cast<long>(i) * ldo;
            const T* ai = a + static_cast<long>(i) * lda;
            if (tb == 0) {
                matmul_tri_sum(oi, ai, 1, b, ldb, r0, i + 1, N, alpha);
                continue;
            }
            for (int k = r0; k <= i; k++) {
                const T s = alpha * ai[k];
                for (int j = 0; j < N; j++) oi[j] += s * b[static_cast<long>(j) * ldb + k];
            }
        }
    }
}

template <typename T>
void matmul_strided(T* out, const T* a, const T* b, int M, int N, int K, int lda, int ldb,
                    int ldo, int tb, T alpha, int acc, int tri, int nb, int nh, int sa_b,
                    int sa_h, int sb_b, int sb_h, int so_b, int so_h) {
    const matmul_batch g{nb, nh, sa_b, sa_h, sb_b, sb_h, so_b, so_h};
    if (M <= 0 || N <= 0 || g.count() <= 0) return;
    if (g.count() == 1) {
        matmul_strided_one(out, a, b, M, N, K, lda, ldb, ldo, tb, alpha, acc, false, tri);
        return;
    }
    #pragma omp parallel for
    for (int e = 0; e < g.count(); e++) {
        matmul_strided_one(out + g.o(e), a + g.a(e), b + g.b(e), M, N, K, lda, ldb, ldo, tb, alpha,
                           acc, true, tri);
    }
}

template <typename T>
void matmul_forward(T* out, const T* inp, const T* weight, const T* bias, int BT, int C, int OC) {
    if (BT <= 0 || OC <= 0) return;
    // out (BT, OC) = inp (BT, C) @ weight^T, weight (OC, C): beta = 0, out only written; then
    // the bias added while out is still in cache. (Filling out with the bias first and running
    // the GEMM with beta = 1 costs one more pass over out, cold: 2-4% slower at the demo
    // model's shapes, one thread.)
    matmul_strided(out, inp, weight, BT, OC, C, C, C, OC, 1, T(1), 0, 0, 1, 1, 0, 0, 0, 0, 0, 0);
    if (bias == nullptr) return;
    #pragma omp parallel for if (static_cast<long>(BT) * OC >= 32768)
    for (int i = 0; i < BT; i++) {
        T* o = out + static_cast<long>(i) * OC;
        for (int j = 0; j < OC; j++) o[j] += bias[j];
    }
}
