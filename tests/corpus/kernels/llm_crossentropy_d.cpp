// Per-position cross-entropy straight from logits: loss = logsumexp(z) − z[target].
// B = batch, T = time, V = vocabulary.  logits: (B,T,V)  targets: (B,T)  losses: (B,T)
#include <cmath>
void crossentropy_forward_d(double* losses, const double* logits, const int* targets, int B, int T, int V) {
  for (int b = 0; b < B; b++) {
    for (int t = 0; t < T; t++) {
      const double* z = logits + b * T * V + t * V;
      double mx = z[0];
      for (int j = 1; j < V; j++) mx = z[j] > mx ? z[j] : mx;
      double se = 0.0;
      for (int j = 0; j < V; j++) se += std::exp(z[j] - mx);
      losses[b * T + t] = mx + std::log(se) - z[targets[b * T + t]];
    }
  }
}
