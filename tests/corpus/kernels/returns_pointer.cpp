// Functions returning a pointer or a reference into a parameter's memory (Clad's
// ReverseForw.C f1-f6): the caller sees a pointer into that argument.
double* scaled_at(double* p, int k, double s) {
    p[k] *= s;
    return p + k;
}

double& larger_of(double* v, int n) {
    int k = 0;
    for (int i = 1; i < n; ++i)
        if (v[i] > v[k])
            k = i;
    return v[k];
}

double returns_pointer(double x, double y) {
    double buf[3] = {x, y, x * y};
    double r = *scaled_at(buf, 1, x);
    double& m = larger_of(buf, 3);
    m += y;
    return r * buf[0] + m * buf[1];
}
