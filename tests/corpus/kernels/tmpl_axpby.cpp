// A template over pointers writing an output: y = a·x + b·y.
template <typename T>
void tmpl_axpby(const T* x, T* y, T a, T b, int n) {
  for (int i = 0; i < n; ++i) y[i] = a * x[i] + b * y[i];
}
