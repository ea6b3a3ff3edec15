// A dense layer applied to the (n, t) rows of a batch in parallel: y[r, o] = b[o] + x[r, :] . w[o, :].
// The reverse of one row adds into its own row of d x, and into every row of d w and all of d b:
// it is split in two nests (opt/fission.py), d x in the rows' order, then d w and d b with o
// outside the rows, in parallel over o (each o owns its row of d w: no partial sums).
void fission_rows(double* y, const double* x, const double* w, const double* b, int N, int T,
                  int C, int O) {
  #pragma omp parallel for collapse(2)
  for (int n = 0; n < N; n++) {
    for (int t = 0; t < T; t++) {
      int r = n * T + t;
      for (int o = 0; o < O; o++) {
        double acc = b != nullptr ? b[o] : 0.0;
        for (int i = 0; i < C; i++) acc += x[r * C + i] * w[o * C + i];
        y[r * O + o] = acc;
      }
    }
  }
}

// Not split: the reverse reads d u after adding into it (u[e] is written, then read by y[e] in
// the same iteration), a dependence between the statements of the row's reverse.
void fission_chain(double* y, double* u, const double* x, const double* w, int R, int C, int O) {
  #pragma omp parallel for
  for (int r = 0; r < R; r++) {
    for (int o = 0; o < O; o++) {
      double v = 0;
      for (int i = 0; i < C; i++) v += x[r * C + i] * w[o * C + i];
      u[r * O + o] = v;
      y[r * O + o] = 2.0 * u[r * O + o];
    }
  }
}

// The same layer without OpenMP, rows one after the other: the serial reverse nest is split the
// same way (the pass over serial nests), o outside the rows in the nest of sums.
void fission_serial(double* y, const double* x, const double* w, const double* b, int R, int C,
                    int O) {
  for (int r = 0; r < R; r++) {
    for (int o = 0; o < O; o++) {
      double acc = b[o];
      for (int i = 0; i < C; i++) acc += w[o * C + i] * x[r * C + i];
      y[r * O + o] = acc;
    }
  }
}
