// A pointer into a local array, moved along it: the split sweep stores it as an offset.
double ptr_local_moved(const double* x, int n) {
    double buf[4];
    double* p = buf;
    for (int i = 0; i < n; i++) {
        *p = x[i] * x[i];
        p++;
    }
    return buf[0] + buf[1] * buf[2];
}
