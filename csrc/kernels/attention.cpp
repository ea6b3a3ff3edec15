// Causal multi-head self-attention core: scores, causal mask, softmax, weighted sum of the values.
// One kernel, differentiated as a whole by torchclad's engine; our own code, llm.c style.
//
// B = batch, T = time, C = channels, NH = heads, hs = C / NH = head size.
// In code the time size is `Tn`: `T` is the scalar type of the template.
//
// void attention_forward(T* out, T* TORCHCLAD_WRITE_ONCE preatt, T* TORCHCLAD_WRITE_ONCE att,
//                        const T* inp, int B, int Tn, int C, int NH)
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
// preatt and att are marked TORCHCLAD_WRITE_ONCE (each element written once per call, read only
// after): the engine cannot prove by itself that rows written for different (b, h, t) never
// overlap, and would otherwise tape every element it writes (docs/ENGINE_REQUESTS.md nn-4).
// With the mark the tape holds two values per row, its argmax and its sum of exps; the sweep
// reads the probabilities back from att (both the local `as` below and the exp's derivative:
// a probability is written as exp(score - max - log(sum)), whose derivative is itself).
//
// Parallel: the forward runs the (b, h, t) triples in parallel (`collapse(3)`: a query row's
// scores, softmax and weighted sum touch only its own rows of out, preatt and att; the engine
// keeps each triple's argmax and sum in per-iteration slots). The reverse of query row t adds
// into the key and value rows s <= t of its head, which other rows of the same (b, h) touch
// too: the engine runs the (b, h) pairs in parallel and a pair's rows in order inside it.
//
// Written for the engine and the vectoriser (the generated reverse sweep runs in backward):
// - Each score q . k is summed in 16 lanes over the head's channels (lane j sees channels j,
//   16 + j, ...; the last hs % 16 after them), then the lanes: vectorisable, one fixed order.
// - The softmax shift is torchclad::detach(row max) (a stop-gradient, exact in value): the
//   reverse sweep carries no derivative through it (with the max itself it would: zero in exact
//   arithmetic, computed as a serial reduction over the row). Exact matters: exp(max - shift)
//   is exactly 1, so a saturated row (one probability 1, the rest 0) gets an exactly zero
//   gradient, as with torch (a shift of floor(max) would leave a rounding error there that large
//   scores amplify). The row's sum of exps runs in 32 lanes (their exps vectorise too).
// - The weighted sum reads each probability into a local first: its adjoint, a dot product over
//   the head's channels, is then accumulated in a register. (The engine does that by itself for
//   the layer kernel, but not for this kernel called from the fused GPT-2, whose arguments all
//   point into one arena; there the accumulation went through memory, 4x slower. The local
//   costs one taped value per (t, s) pair.)
#include <torchclad/runtime.h>  // torchclad::detach
#include <cmath>

template <typename T>
void attention_forward(T* out, T* TORCHCLAD_WRITE_ONCE preatt, T* TORCHCLAD_WRITE_ONCE att,
                       const T* inp, int B, int Tn, int C, int NH) {
    int hs = C / NH;
    int C3 = 3 * C;
    int hb = hs / 16;  // full 16-lane blocks of a head's channels
    T scale = T(1) / std::sqrt(T(hs));
    #pragma omp parallel for collapse(3)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < Tn; t++) {
                const T* q = inp + (b * Tn + t) * C3 + h * hs;
                T* pre = preatt + ((b * NH + h) * Tn + t) * Tn;
                T* a = att + ((b * NH + h) * Tn + t) * Tn;
                // scores of the visible positions, and where the largest is (an int: no
                // derivative of its own)
                int smax = 0;
                for (int s = 0; s <= t; s++) {
                    const T* k = inp + (b * Tn + s) * C3 + C + h * hs;
                    T acc[16];
                    for (int j = 0; j < 16; j++) acc[j] = T(0);
                    for (int kb = 0; kb < hb; kb++) {
                        for (int j = 0; j < 16; j++) acc[j] += q[kb * 16 + j] * k[kb * 16 + j];
                    }
                    T dot = 0;
                    for (int i = hb * 16; i < hs; i++) dot += q[i] * k[i];
                    for (int j = 0; j < 16; j++) dot += acc[j];
                    pre[s] = dot * scale;
                    smax = pre[s] > pre[smax] ? s : smax;
                }
                for (int s = t + 1; s < Tn; s++) pre[s] = T(0);
                // softmax, shifted by the row max so that exp never overflows (detached: no
                // derivative through the shift); each probability written once, as one exp
                // (no in-place normalisation; the sweep reads it back instead of an exp)
                T mx = torchclad::detach(pre[smax]);
                int n = t + 1;
                int sb = n / 32;
                T e[32];
                for (int j = 0; j < 32; j++) e[j] = T(0);
                for (int kb = 0; kb < sb; kb++) {
                    for (int j = 0; j < 32; j++) e[j] += std::exp(pre[kb * 32 + j] - mx);
                }
                T sum = 0;
                for (int s = sb * 32; s < n; s++) sum += std::exp(pre[s] - mx);
                for (int j = 0; j < 32; j++) sum += e[j];
                T ls = std::log(sum);
                for (int s = 0; s < n; s++) a[s] = std::exp(pre[s] - mx - ls);
                for (int s = n; s < Tn; s++) a[s] = T(0);
                // weighted sum of the values, position-major so the inner loop is contiguous
                T* o = out + (b * Tn + t) * C + h * hs;
                for (int i = 0; i < hs; i++) o[i] = T(0);
                for (int s = 0; s <= t; s++) {
                    const T* v = inp + (b * Tn + s) * C3 + 2 * C + h * hs;
                    T as = a[s];  // d as: summed in a register in the reverse sweep
                    for (int i = 0; i < hs; i++) o[i] += as * v[i];
                }
            }
        }
    }
}
