// Loop order in the reverse sweep: an element overwritten in every iteration (only the last
// write counts) keeps its reverse loop backwards; strided, disjoint writes run forwards.
void order_resets(double* out, const double* x, int n) {
    for (int i = 0; i < n; i++) out[0] = x[i] * x[i];
    for (int i = 0; i < n; i++) out[1 + 2 * i] = 3.0 * x[i] + out[0];
    for (int i = 0; i < n; i++) out[2 + 2 * i] = out[1 + 2 * i] * x[i];
}
