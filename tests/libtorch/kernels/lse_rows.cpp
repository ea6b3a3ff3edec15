// A loop with reductions: out[b] = log sum_c exp(x[b, c]) per row, with the max shift kept out
// of the derivative (torchclad::detach), as torch.logsumexp computes it.
// B = rows, C = columns
#include <cmath>

#include <torchclad/runtime.h>  // torchclad::detach

template <typename T>
void lse_rows(T* out, const T* x, int B, int C) {
  for (int b = 0; b < B; b++) {
    const T* row = x + b * C;
    T m = row[0];
    for (int c = 1; c < C; c++) m = row[c] > m ? row[c] : m;
    m = torchclad::detach(m);
    T s = 0;
    for (int c = 0; c < C; c++) s += std::exp(row[c] - m);
    out[b] = m + std::log(s);
  }
}
