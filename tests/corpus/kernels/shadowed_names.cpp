// Block-scope shadowing of a local and a loop-body local shadowing an outer one; a parameter
// overwritten inside the shadowing block.
double shadowed_names(double x, double y) {
  double a = x * y;
  {
    double a = x + y;
    y = a * a;
  }
  double r = a;
  for (int i = 0; i < 2; ++i) {
    double r = a * i;
    x += r;
  }
  return r * x + y;
}
