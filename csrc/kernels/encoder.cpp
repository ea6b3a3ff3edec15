// Embedding lookups, llm.c style (our own code).
//
// B = batch, T = time, C = channels, V = vocabulary size, maxT = number of positions.
// In code the time size is `Tn`: `T` is the scalar type of the templates.
// The forward loops are OpenMP-parallel; the generated reverse sweeps (scatter-adds into the
// tables, where two rows may hit one entry) stay serial.
//
// void embedding_forward(T* out, const long* idx, const T* weight, int N, int C)
//   idx (N) int64, weight (V, C)  ->  out (N, C),  out[n, :] = weight[idx[n], :]
//   Every idx must be in [0, V): the caller checks (the kernel does not know V).
//   Differentiated w.r.t. weight: the generated sweep scatter-adds d out into d weight.
//
// void encoder_forward(T* out, const long* idx, const T* wte, const T* wpe, int B, int Tn, int C)
//   GPT-2's input layer: token plus position embedding.
//   idx (B, T) int64, wte (V, C), wpe (maxT, C) with T <= maxT  ->  out (B, T, C)
//   out[b, t, :] = wte[idx[b, t], :] + wpe[t, :]
//   Differentiated w.r.t. wte and wpe; idx checked by the caller as above.
template <typename T>
void embedding_forward(T* out, const long* idx, const T* weight, int N, int C) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const T* w = weight + idx[n] * C;
        T* o = out + n * C;
        for (int i = 0; i < C; i++) o[i] = w[i];
    }
}

template <typename T>
void encoder_forward(T* out, const long* idx, const T* wte, const T* wpe, int B, int Tn, int C) {
    #pragma omp parallel for
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < Tn; t++) {
            const T* tok = wte + idx[b * Tn + t] * C;
            const T* pos = wpe + t * C;
            T* o = out + (b * Tn + t) * C;
            for (int i = 0; i < C; i++) o[i] = tok[i] + pos[i];
        }
    }
}
