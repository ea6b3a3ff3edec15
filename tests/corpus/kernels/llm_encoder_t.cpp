// Token plus position embedding as a template.  B = batch, L = time, C = channels.
template <typename T>
void encoder_forward_t(T* out, const int* tokens, const T* wte, const T* wpe, int B, int L, int C) {
  for (int b = 0; b < B; b++) {
    for (int l = 0; l < L; l++) {
      int id = tokens[b * L + l];
      for (int i = 0; i < C; i++) out[(b * L + l) * C + i] = wte[id * C + i] + wpe[l * C + i];
    }
  }
}
