// An integer index input: GPT-2's encoder, token embedding plus position embedding.
// B = batch, T = time, C = channels; idx (B, T) indexes the rows of wte (V, C).
template <typename T>
void encoder(T* out, const int* idx, const T* wte, const T* wpe, int B, int Tn, int C) {
  for (int b = 0; b < B; b++) {
    for (int t = 0; t < Tn; t++) {
      const T* tok = wte + idx[b * Tn + t] * C;
      const T* pos = wpe + t * C;
      T* o = out + (b * Tn + t) * C;
      for (int c = 0; c < C; c++) o[c] = tok[c] * pos[c] + tok[c];
    }
  }
}
