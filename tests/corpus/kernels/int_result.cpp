// A function whose result is an integer (Clad's Gradients.C f_types): the conversion to an
// integer cuts the derivative, so every gradient is zero, and the float + double arithmetic
// of its body must still compile.
unsigned int_result(int k, float y, double z) {
    return k + y * 0.25f + z;
}

// ... called from a floating function: its result is a constant there
double int_result_user(float y, double z) {
    double u = int_result(3, y, z);
    return u * z + y;
}
