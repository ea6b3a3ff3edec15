// A fully connected layer, llm.c style: out = inp @ weight^T + bias.
// BT = rows (batch * time), C = input channels, OC = output channels.
template <typename T>
void linear(T* out, const T* inp, const T* weight, const T* bias, int BT, int C, int OC) {
  for (int bt = 0; bt < BT; bt++) {
    const T* x = inp + bt * C;
    for (int o = 0; o < OC; o++) {
      const T* w = weight + o * C;
      T s = bias[o];
      for (int c = 0; c < C; c++) s += x[c] * w[c];
      out[bt * OC + o] = s;
    }
  }
}
