// AD-BUG-PATTERNS 9: a while loop whose exit depends on a differentiable value.
// x_{j+1} = r·x_j + 0.1 until x ≥ limit; limit only decides the trip count.
double abp09_while_diff_exit(double x, double r, double limit) {
  int steps = 0;
  while (x < limit) {
    x = x * r + 0.1;
    steps++;
  }
  return x * x + steps;
}
