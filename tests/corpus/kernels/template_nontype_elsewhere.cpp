// A function template with a non-type parameter elsewhere in the source (Clad's Gradients.C
// fn_template_non_type): differentiating another function is not blocked by it.
template <int N>
double scaled(double x) { return N * x; }

double template_nontype_elsewhere(double x, double y) {
    return x * y + scaled<3>(1.0);
}
