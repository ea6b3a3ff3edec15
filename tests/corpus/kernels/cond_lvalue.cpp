// A ?: whose branches assign the same variable, used as an assignment target (Clad's
// Assignments.C f12): it is that variable, after the branch taken.
double cond_lvalue(double x, double y) {
    double t;
    (x > y ? (t = x) : (t = y)) *= y;
    double u = 0;
    x > 0 && (u = x * y) > 0.25 ? u += y : u -= x;
    return t + u;
}
