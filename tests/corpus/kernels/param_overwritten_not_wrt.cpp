// A parameter outside wrt that the body overwrites from one in wrt (Clad's Assignments.C
// f17/f18): its adjoint is local; there is no caller buffer to add it to.
double param_overwritten_not_wrt(double i, double j, double k) {
    j = 2 * i;
    k = 2 * i + 2 * j;
    k += i * j;
    return k * j;
}
