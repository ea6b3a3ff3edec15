// Gather/scatter through an int index array; repeated indices accumulate. count is an int output.
void int_array_gather(const double* table, const int* idx, int n, double* out, int* count) {
  for (int i = 0; i < n; ++i) {
    int j = idx[i];
    out[j] += table[i] * table[i];
    count[j]++;
  }
  for (int j = 0; j < 4; ++j) out[j] *= (double)(count[j] + 1);
}
