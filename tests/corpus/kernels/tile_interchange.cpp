// A register-tiled matrix product (rows in tiles of 4 kept in a small accumulator array, each
// weight loaded once per tile): the reverse of the tile loop is interchanged so that the sweep
// runs along the contiguous index `k` innermost (opt/interchange.py). R must be a multiple of 4.
void tile_interchange(double* y, const double* x, const double* w, int R, int K, int N) {
    const int TILE = 4;
    for (int r0 = 0; r0 < R; r0 += TILE) {
        for (int n = 0; n < N; n++) {
            double acc[TILE];
            for (int j = 0; j < TILE; j++) acc[j] = 0.0;
            for (int k = 0; k < K; k++) {
                double wk = w[n * K + k];
                for (int j = 0; j < TILE; j++) {
                    int r = r0 + j;
                    acc[j] += x[r * K + k] * wk;
                }
            }
            for (int j = 0; j < TILE; j++) y[(r0 + j) * N + n] = acc[j];
        }
    }
}

// Not interchanged: the tile loop's bound moves with the contiguous index (a triangle).
void tile_triangle(double* y, const double* x, const double* w, int K) {
    for (int k = 0; k < K; k++) {
        double wk = w[k];
        for (int j = 0; j <= k; j++) y[j] += x[j * K + k] * wk;
    }
}
