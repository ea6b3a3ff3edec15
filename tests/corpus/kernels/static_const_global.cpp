// static const globals: a coefficient table, a scale and a trip count.
// f = 1.5 (0.5 − 1.25x + 2x² + 0.75x³)
static const double kCoef[4] = {0.5, -1.25, 2.0, 0.75};
static const double kScale = 1.5;
static const int kTerms = 4;

double static_const_global(double x) {
  double s = 0.0;
  double p = 1.0;
  for (int i = 0; i < kTerms; ++i) {
    s += kCoef[i] * p;
    p *= x;
  }
  return kScale * s;
}
