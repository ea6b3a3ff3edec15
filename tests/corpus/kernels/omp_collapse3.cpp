// llm.c's attention_forward shape: collapse(3) over (b, t, h). The reverse of query row t adds
// into key rows s <= t, which other values of t touch too, so only the outer loop (b) runs in
// parallel in the reverse; t and h run serially inside each b.
void omp_collapse3(double* out, const double* inp, int B, int T, int C, int H) {
  int D = C / H;
  #pragma omp parallel for collapse(3)
  for (int b = 0; b < B; b++) {
    for (int t = 0; t < T; t++) {
      for (int h = 0; h < H; h++) {
        const double* q = inp + (b * T + t) * 2 * C + h * D;
        double acc = 0;
        for (int s = 0; s <= t; s++) {
          const double* k = inp + (b * T + s) * 2 * C + C + h * D;
          double dot = 0;
          for (int i = 0; i < D; i++) dot += q[i] * k[i];
          acc += dot * dot;
        }
        out[(b * T + t) * H + h] = acc;
      }
    }
  }
}
