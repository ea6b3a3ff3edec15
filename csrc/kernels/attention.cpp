// Causal multi-head self-attention core: scores, causal mask, softmax, weighted sum of the values.
// One kernel, differentiated as a whole by torchclad's engine; our own code, llm.c style. Its two
// products are GEMMs (matmul_strided, csrc/kernels/matmul.cpp, whose hand-written BLAS
// derivative the engine calls); the mask and the softmax are differentiated by the engine.
//
// B = batch, T = time, C = channels, NH = heads, hs = C / NH = head size.
// In code the time size is `Tn`: `T` is the scalar type of the template.
//
// void attention_forward(T* TORCHCLAD_WRITE_ONCE out, T* TORCHCLAD_WRITE_ONCE preatt,
//                        T* TORCHCLAD_WRITE_ONCE att, const T* inp, int B, int Tn, int C, int NH)
//   inp    (B, T, 3C)     q, k, v packed the way c_attn produces them: channels [0, C) are the
//                         queries, [C, 2C) the keys, [2C, 3C) the values; head h owns channels
//                         [h*hs, (h+1)*hs) of each of the three.
//   out    (B, T, C)      the heads side by side (the input of c_proj).
//   preatt (B, NH, T, T)  scores q_t . k_s / sqrt(hs) for s <= t; 0 above the diagonal.
//   att    (B, NH, T, T)  softmax over s <= t of the scores; 0 above the diagonal (causal mask).
//   out[b, t, h*hs + i] = sum_{s <= t} att[b, h, t, s] * v[b, s, h*hs + i]
//   Differentiated w.r.t. inp (out, preatt and att are outputs too, so they can be seeded).
//   Requires NH > 0 and C % NH == 0 (checked by the caller, as is B * NH * T * T < 2^31).
//
// Per (b, h): scores = q_bh @ k_bh^T * scale and out_bh = att_bh @ v_bh are GEMMs through
// matmul_strided, a batched GEMM with row strides (the rows of q, k and v lie 3C apart inside
// inp, those of out C apart; the batch is the B x NH grid of (b, h)), one call per product. The
// engine does not differentiate the GEMM: it calls the custom derivative
// matmul_strided_pullback (csrc/custom/matmul.cpp, the one hand-written derivative family, BLAS),
// and matmul_strided_pushforward / _pullback_pushforward in forward mode and double backward.
// The scores are computed by blocks of 64 query rows, each against the keys up to its last row
// (matmul_strided's tri = 2), and the part above the diagonal is then masked: at T = 256, 62.5%
// of the full T x T product's flops (the whole product at T <= 64), in BLAS's blocked kernels.
//
// out, preatt and att are marked TORCHCLAD_WRITE_ONCE: the engine cannot prove by itself that
// the slices written for different (b, h) or t never overlap, and would otherwise tape every
// element it writes (docs/ENGINE_REQUESTS.md nn-4). out and att are written once each; preatt
// above the diagonal is written by the mask's 0, and inside a block's diagonal block first by
// the GEMM (a score nothing reads): the reverse of the mask zeroes its adjoint and the GEMM's
// pullback needs q and k only. The tape holds two values per row, its max and its sum of exps;
// the sweep reads the probabilities back from att (a probability is written as
// exp(score - max - log(sum)), whose derivative is itself).
//
// Threads: matmul_strided runs the (b, h) GEMMs in parallel, each on one thread (the same bits
// at any thread count), in the forward and in its pullback. (Written as an `omp parallel for`
// over (b, h) in this kernel, calling one GEMM per iteration, the engine keeps the reverse loop
// serial: "the reverse loop runs serially: it calls
// 'clad::custom_derivatives::matmul_strided_pullback', whose adjoint writes the engine does not
// check" -- it cannot see which slices of d inp the custom pullback writes. Hence the batch
// inside the GEMM call.) The softmax runs the (b, h, t) rows in parallel (`collapse(3)`), in
// the forward and in the reverse: a row touches only its own rows of preatt and att and of
// their adjoints.
//
// Softmax, written for the engine and the vectoriser (the generated reverse sweep runs in
// backward):
// - The shift is torchclad::detach(row max) (a stop-gradient, exact in value): the reverse
//   sweep carries no derivative through it (with the max itself it would: zero in exact
//   arithmetic, computed as a serial reduction over the row). Exact matters: exp(max - shift)
//   is exactly 1, so a saturated row (one probability 1, the rest 0) gets an exactly zero
//   gradient, as with torch. The row's max and its sum of exps run in 16 lanes (the exps
//   vectorise too). The sum's last, partial block runs as a full block of 16 (the vector exp,
//   no scalar tail): its lanes past the row's end read the mask's zeros, written just before,
//   and a select drops them -- a select, so that exp(0 - max), inf when every score is below
//   -88, is not multiplied by 0 into a NaN; in the sweep their adjoint writes land above the
//   diagonal, which the mask's reverse then zeroes. The block stops at the row's storage end
//   (std::min(Tn - sb * 16, 16) lanes), which also tells the engine the rows stay disjoint.
#include <torchclad/runtime.h>  // torchclad::detach
#include <algorithm>  // std::min
#include <cmath>

template <typename T>
void attention_forward(T* TORCHCLAD_WRITE_ONCE out, T* TORCHCLAD_WRITE_ONCE preatt,
                       T* TORCHCLAD_WRITE_ONCE att, const T* inp, int B, int Tn, int C, int NH) {
    int hs = C / NH;
    int C3 = 3 * C;
    T scale = T(1) / std::sqrt(T(hs));
    // scores (Tn, Tn) = q (Tn, hs) @ k^T * scale for each (b, h), the causal part by blocks of
    // 64 query rows (tri = 2: columns right of a block's diagonal block are not computed; the
    // mask below writes every score above the diagonal)
    matmul_strided(preatt, inp, inp + C, Tn, Tn, hs, C3, C3, Tn, 1, scale, 0, 2,
                   B, NH, Tn * C3, hs, Tn * C3, hs, NH * Tn * Tn, Tn * Tn);
    // causal mask and softmax, one query row per iteration
    #pragma omp parallel for collapse(3)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < Tn; t++) {
                T* pre = preatt + ((b * NH + h) * Tn + t) * Tn;
                T* a = att + ((b * NH + h) * Tn + t) * Tn;
                // the largest visible score, in 16 lanes (a chain of compares through the
                // index of the max so far did not vectorise); a NaN never wins a compare, as
                // with an argmax, so the value is the same; no derivative (detach)
                int n = t + 1;
                int sb = n / 16;  // full blocks of 16; then n % 16 more
                // the lanes of a full block, counted as std::min(16, Tn) (16 wherever a full
                // block exists): a count g++ cannot see is constant, so it keeps the block loops
                // below and vectorises them (the vector exp) instead of unrolling them into 16
                // scalar operations (16 calls of the scalar exp)
                int width = std::min(16, Tn);
                T mv[16];
                for (int j = 0; j < 16; j++) mv[j] = pre[0];
                for (int kb = 0; kb < sb; kb++) {
                    for (int j = 0; j < width; j++) {
                        T v = pre[kb * 16 + j];
                        mv[j] = v > mv[j] ? v : mv[j];
                    }
                }
                T m0 = pre[0];
                for (int s = sb * 16; s < n; s++) m0 = pre[s] > m0 ? pre[s] : m0;
                for (int j = 0; j < 16; j++) m0 = mv[j] > m0 ? mv[j] : m0;
                for (int s = t + 1; s < Tn; s++) pre[s] = T(0);
                T mx = torchclad::detach(m0);
                T e[16];
                for (int j = 0; j < 16; j++) e[j] = T(0);
                for (int kb = 0; kb < sb; kb++) {
                    for (int j = 0; j < width; j++) e[j] += std::exp(pre[kb * 16 + j] - mx);
                }
                // the scores after the full blocks (0 to 15) as one more block of 16 for the
                // vector exp: lanes past the row's end (j >= rest) read the mask's zeros written
                // above and add nothing; the block stops at the end of the row's storage
                int rest = n - sb * 16;
                int lanes = std::min(Tn - sb * 16, 16);
                for (int j = 0; j < lanes; j++) {
                    T ev = std::exp(pre[sb * 16 + j] - mx);
                    e[j] += j < rest ? ev : T(0);
                }
                T sum = 0;
                for (int j = 0; j < 16; j++) sum += e[j];
                T ls = std::log(sum);
                for (int s = 0; s < n; s++) a[s] = std::exp(pre[s] - mx - ls);
                for (int s = n; s < Tn; s++) a[s] = T(0);
            }
        }
    }
    // out (Tn, hs) = att (Tn, Tn) @ v (Tn, hs) for each (b, h); att is 0 above the diagonal
    matmul_strided(out, att, inp + 2 * C, Tn, hs, Tn, Tn, C3, C, 0, T(1), 0, 1,
                   B, NH, NH * Tn * Tn, Tn * Tn, Tn * C3, hs, Tn * C, hs);
}
