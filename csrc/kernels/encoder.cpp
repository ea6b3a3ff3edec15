// Embedding lookups, llm.c style (our own code).
//
// B = batch, T = time, C = channels, V = vocabulary size, maxT = number of positions.
// In code the time size is `Tn`: `T` is the scalar type of the templates.
//
// void embedding_forward(T* out, const long* idx, const T* weight, int N, int C, int V)
//   idx (N) int64, weight (V, C)  ->  out (N, C),  out[n, :] = weight[idx[n], :]
//   Every idx must be in [0, V): the caller checks.
//   Differentiated w.r.t. weight: the generated sweep scatter-adds d out into d weight.
//
// void encoder_forward(T* out, const long* idx, const T* wte, const T* wpe, int B, int Tn, int C,
//                      int V)
//   GPT-2's input layer: token plus position embedding.
//   idx (B, T) int64, wte (V, C), wpe (maxT, C) with T <= maxT  ->  out (B, T, C)
//   out[b, t, :] = wte[idx[b, t], :] + wpe[t, :]
//   Differentiated w.r.t. wte and wpe; idx checked by the caller as above.
//
// Parallel in both sweeps: the rows are independent in the forward. In the reverse two rows may
// add into one row of d weight / d wte (the same token), and every batch row adds into all of
// d wpe: the engine gives each fixed chunk of rows its own partial sums, added in chunk order
// (the same bits for any number of threads). For that it needs to know the rows stay within
// the table: `(id < 0 ? 0 : id) % V` is the row for a valid id (0 <= id < V), and a row of the
// table for any id.
template <typename T>
void embedding_forward(T* out, const long* idx, const T* weight, int N, int C, int V) {
    #pragma omp parallel for
    for (int n = 0; n < N; n++) {
        long id = idx[n];
        const T* w = weight + (id < 0 ? 0 : id) % V * C;
        T* o = out + n * C;
        for (int i = 0; i < C; i++) o[i] = w[i];
    }
}

template <typename T>
void encoder_forward(T* out, const long* idx, const T* wte, const T* wpe, int B, int Tn, int C,
                     int V) {
    #pragma omp parallel for
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < Tn; t++) {
            long id = idx[b * Tn + t];
            const T* tok = wte + (id < 0 ? 0 : id) % V * C;
            const T* pos = wpe + t * C;
            T* o = out + (b * Tn + t) * C;
            for (int i = 0; i < C; i++) o[i] = tok[i] + pos[i];
        }
    }
}
