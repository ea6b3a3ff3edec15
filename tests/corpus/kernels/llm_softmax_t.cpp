// Row softmax as a template; the maximum is found with std::max and the division is per element.
#include <algorithm>
#include <cmath>
template <typename T>
void softmax_forward_t(T* probs, const T* logits, int N, int V) {
  for (int r = 0; r < N; r++) {
    const T* z = logits + r * V;
    T mx = z[0];
    for (int j = 1; j < V; j++) mx = std::max(mx, z[j]);
    T sum = 0;
    for (int j = 0; j < V; j++) sum += std::exp(z[j] - mx);
    for (int j = 0; j < V; j++) probs[r * V + j] = std::exp(z[j] - mx) / sum;
  }
}
