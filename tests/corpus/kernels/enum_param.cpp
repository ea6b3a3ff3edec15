// A switch over an enum parameter (Clad's Switch.C fn24): the enum is passed by value.
enum Op { Add, Sub, Mul, Div };

double enum_param(double x, double y, Op op) {
    double res = 0;
    switch (op) {
        case Add: res = x + y; break;
        case Sub: res = x - y; break;
        case Mul: res = x * y; break;
        case Div: res = x / y; break;
    }
    return res;
}
