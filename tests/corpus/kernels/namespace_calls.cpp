// Calls into nested namespaces (Clad's FunctionCalls.C fn11): a function with a custom
// derivative in clad::custom_derivatives::n1::n2, and one differentiated from its body.
namespace n1 {
inline namespace n2 {
double sum(const double& x, const double& y) { return x + y; }
}
namespace inner {
double cube(double x) { return x * x * x; }
}
}

namespace clad {
namespace custom_derivatives {
namespace n1 {
inline namespace n2 {
void sum_pullback(const double& x, const double& y, double d_y, double* d_x, double* d_y2) {
    *d_x += d_y;
    *d_y2 += d_y;
}
}
}
}
}

double namespace_calls(double x, double y) {
    return n1::n2::sum(x, y) * n1::inner::cube(y);
}
