// Token plus position embedding.  B = batch, T = time, C = channels, tokens index rows of wte.
// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]; repeated tokens accumulate into the same wte row.
void encoder_forward_d(double* out, const int* tokens, const double* wte, const double* wpe, int B, int T, int C) {
  for (int b = 0; b < B; b++) {
    for (int t = 0; t < T; t++) {
      double* row = out + b * T * C + t * C;
      const double* tok = wte + tokens[b * T + t] * C;
      const double* pos = wpe + t * C;
      for (int i = 0; i < C; i++) row[i] = tok[i] + pos[i];
    }
  }
}
