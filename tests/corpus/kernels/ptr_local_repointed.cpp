// A pointer re-pointed within one local array every iteration (recorded as an offset).
double ptr_local_repointed(const double* x, int n) {
    double buf[4] = {0, 0, 0, 0};
    double* p = buf;
    for (int i = 0; i < n; i++) {
        p = buf + (i % 4);
        *p = *p * x[i] + x[i] * x[i];
    }
    return buf[0] * buf[1] + *p;
}
