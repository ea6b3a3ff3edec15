// Clad's non_differentiable attribute: what it marks carries no derivative (a variable, a
// function, a field, a parameter, a whole class).
#define non_differentiable __attribute__((annotate("non_differentiable")))

struct Gains {
    double a;
    non_differentiable double b;
};

class non_differentiable Frozen {
public:
    double v = 2;
    double twice(double x) const { return 2 * v * x; }
};

non_differentiable double scale(double x, double y) { return x * y; }

double nondiff_attr(double x, double y, non_differentiable const double* z) {
    non_differentiable double k = x * x * y;
    Gains g{x, y};
    Frozen f;
    return k + scale(x, y) + x * y + g.a * g.b + f.twice(x) + z[0] * x;
}
