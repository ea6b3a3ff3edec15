// Mean cross-entropy over N positions from logits, as a template returning the loss.
#include <cmath>
template <typename T>
T crossentropy_mean_t(const T* logits, const int* targets, int N, int V) {
  T total = 0;
  for (int n = 0; n < N; n++) {
    const T* z = logits + n * V;
    T mx = z[0];
    for (int j = 1; j < V; j++)
      if (z[j] > mx) mx = z[j];
    T se = 0;
    for (int j = 0; j < V; j++) se += std::exp(z[j] - mx);
    T logp = z[targets[n]] - mx - std::log(se);
    total -= logp;
  }
  return total / N;
}
