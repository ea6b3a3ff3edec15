// Nested loops: f = Σ_i (Σ_j A_ij v_j)²
double nested_loops(const double* A, const double* v, int n, int m) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) {
    double row = 0.0;
    for (int j = 0; j < m; ++j) row += A[i * m + j] * v[j];
    s += row * row;
  }
  return s;
}
