// Recursion (Clad's FunctionCalls.C fn16, EarlyReturns.C callsRec): the pullback calls
// itself, each call popping what its forward pushed.
double power_rec(double x, int n) {
    if (n <= 0)
        return 1.0;
    double h = power_rec(x, n - 1);
    return h * x;
}

double recursion(double x, double y, int n) {
    return power_rec(x, n) * y + power_rec(y, 2);
}
