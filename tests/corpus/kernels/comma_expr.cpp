// The comma operator and assignments inside expressions, sequenced as C++ sequences them
// (Clad's CommaOperator.C, Gradients.C fn_cond_add_assign): the left operand runs first,
// an assignment's value is its target, ?: / && / || run their side effects only when taken.
double comma_expr(double a, double b, double c) {
    double t = (a += 1.0, a * b);
    (a, b) = c * t;
    double u = c > 0 ? (t = t * a, t) : (t = -t);
    bool ok = t > 0 && (u += b * b) > 0;
    return (t, u) * (ok ? 2.0 : 1.0) + ((a = a * c), a);
}
