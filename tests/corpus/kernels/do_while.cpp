// do-while loops: a power series, and Newton iterations for sqrt(y) whose trip count depends
// on the data (the result is the iterate, not exactly sqrt(y)).
#include <cmath>
double do_while(double x, double y, int n) {
  double s = 0.0;
  int k = 0;
  do {
    s += std::pow(x, k) * y;
    k++;
  } while (k < n);
  double t = x;
  do {
    t = 0.5 * (t + y / t);
  } while (std::fabs(t * t - y) > 1e-3 * y);
  return s + t;
}
