// Rotary position embedding (Su et al. 2021, RoFormer), llm.c style (our own code).
//
// B = batch, T = time, NH = heads, HS = head size (even). Each head vector is a sequence of
// HS / 2 pairs (x[2i], x[2i + 1]); at position t pair i turns by the angle t * theta_i,
// theta_i = base^(-2i / HS) (the tables come from the caller: cos and sin of those angles).
//
// void rope_forward(T* out, const T* inp, const T* freqs_cos, const T* freqs_sin,
//                   int B, int Tn, int NH, int HS)
//   inp (B, T, NH, HS), freqs_cos / freqs_sin (T', HS / 2) with T' >= T (only the first T rows
//   are read)  ->  out (B, T, NH, HS),
//   out[2i] = x[2i] cos - x[2i + 1] sin,  out[2i + 1] = x[2i] sin + x[2i + 1] cos
//   Differentiated w.r.t. inp (the tables are constants of the module, not parameters).
//
// OpenMP-parallel over the (b, t) rows; so is the generated reverse loop (every row its own).
template <typename T>
void rope_forward(T* out, const T* inp, const T* freqs_cos, const T* freqs_sin, int B, int Tn,
                  int NH, int HS) {
    int half = HS / 2;
    #pragma omp parallel for
    for (int bt = 0; bt < B * Tn; bt++) {
        int t = bt % Tn;
        const T* c = freqs_cos + t * half;
        const T* s = freqs_sin + t * half;
        for (int h = 0; h < NH; h++) {
            const T* x = inp + (bt * NH + h) * HS;
            T* o = out + (bt * NH + h) * HS;
            for (int i = 0; i < half; i++) {
                T x0 = x[2 * i];
                T x1 = x[2 * i + 1];
                o[2 * i] = x0 * c[i] - x1 * s[i];
                o[2 * i + 1] = x0 * s[i] + x1 * c[i];
            }
        }
    }
}
