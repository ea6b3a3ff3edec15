// Reference parameters and locals, as Clad users write them: the adjoint of a reference
// parameter is its _d_ pointer; a reference local is another name for what it binds; a
// const reference to a temporary holds the value.
void accumulate(double& acc, const double& x, double w) {
    acc += w * x * x;
}

double ref_params(double& y, const double* x, int n, double w) {
    double s = 0;
    for (int i = 0; i < n; ++i)
        accumulate(s, x[i], w);
    double& r = y;
    r = r * s + w;
    const double& c = s * 2;
    return r * c;
}
