// Range-based for over local arrays, by value and by reference, and over a braced
// initializer list (Clad's Loops.C fn34 / fn35 / fn37 / fn38).
#include <initializer_list>

double range_for(double x, double y) {
    double a[] = {y, x * y, x * x + y};
    double r = 0;
    for (auto& v : a) {
        v *= x;
        for (auto u : a) r += v * u;
    }
    auto&& list = {1.0, x, 2.0, y};
    for (double e : list) r += e * e;
    return r;
}
