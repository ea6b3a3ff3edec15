// Row softmax with the row maximum subtracted first.  N rows of V entries.
#include <cmath>
void softmax_forward_d(double* probs, const double* logits, int N, int V) {
  for (int r = 0; r < N; r++) {
    const double* z = logits + r * V;
    double* p = probs + r * V;
    double mx = z[0];
    for (int j = 1; j < V; j++)
      if (z[j] > mx) mx = z[j];
    double sum = 0.0;
    for (int j = 0; j < V; j++) {
      p[j] = std::exp(z[j] - mx);
      sum += p[j];
    }
    double inv = 1.0 / sum;
    for (int j = 0; j < V; j++) p[j] *= inv;
  }
}
