// AD-BUG-PATTERNS 5: max/min at a tie split the gradient evenly (PyTorch maximum/minimum).
// At a = b = c:  ∂f/∂a = 0.5 + 4·0.5 = 2.5,  ∂f/∂b = 0.5 + 2·0.5 = 1.5,  ∂f/∂c = 2·0.5 + 4·0.5 = 3.
#include <algorithm>
#include <cmath>
double abp05_max_tie(double a, double b, double c) {
  return std::fmax(a, b) + 2.0 * std::fmin(b, c) + 4.0 * std::max(a, c);
}
