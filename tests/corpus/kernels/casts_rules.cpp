// const_cast, std::fma, std::clamp and a static member function (Clad's Assignments.C
// constValConstCast / f19, FunctionCalls.C fn7 / fn10).
#include <algorithm>
#include <cmath>

struct Counter {
    static int calls;
    static void tick() { ++calls; }
};
int Counter::calls = 0;

double casts_rules(double x, const double y) {
    Counter::tick();
    double z = const_cast<double&>(y);
    double f = std::fma(x, z, y);
    return std::clamp(f, -1.0, 1.0) * x + std::clamp(x, z, 2.0);
}
