// A helper writes a non-const global that its caller then reads and writes (Clad's
// Gradients.C f_reuse_global): the global carries derivatives between the two functions.
double g_scale = 5;

double stash(double a, double b) {
    g_scale = b;
    return a;
}

double global_read_write(double x, double t) {
    t = stash(t, x);
    g_scale *= t;
    g_scale += x * g_scale;
    return -g_scale;
}
