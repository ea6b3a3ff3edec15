// Rows of V entries written at a stride S and normalised in place. With S >= V the rows do not
// overlap and the engine proves that nothing it overwrites was read before (the test of that
// condition runs once on entry); with S < V a later row overwrites the tail of an earlier one,
// whose reverse then needs the values restored from the tape. The generated loops are
// unswitched on that test: the loop without tape operations when it holds, the recording one
// otherwise.
#include <cmath>
void unswitch_rows(double* y, const double* x, int N, int V, int S) {
  for (int r = 0; r < N; r++) {
    double* yr = y + r * S;
    double sum = 0.0;
    for (int j = 0; j < V; j++) {
      yr[j] = std::exp(x[r * V + j]);
      sum += yr[j];
    }
    for (int j = 0; j < V; j++) yr[j] = yr[j] / sum;
  }
}
