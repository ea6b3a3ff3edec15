// Declarations in if / while / for / switch headers, init-statements, case labels in a
// nested block, and a do-while whose condition has side effects (Clad's Gradients.C
// fn_cond_decl / fn_cond_init, Loops.C fn8 / fn10 / fn13, SwitchInit.C fn1).
double cond_decls(double x, double y, int n) {
    double res = 0;
    if (int k = n - 2) res += k * x;
    if (double t = x * y; t > 0) res += t; else res -= t;
    int count = n;
    while (int b = count) {
        res += b * y;
        count -= 1;
    }
    for (int i = 0; int k = 3 - i; ++i) res += k * x * y;
    switch (int m = n % 3; m) {
        case 0: res += x * x; break;
        case 1: res += y * y; {
            case 2: res += x * y;
        }
        default: res *= 2;
    }
    int c = 3;
    do {
        res += x;
    } while (--c);
    return res;
}
