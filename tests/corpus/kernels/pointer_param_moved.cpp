// A pointer parameter advanced inside a loop (Clad's Pointers.C pointerParam): each
// iteration reads the element it points at now, not element 0.
double pointer_param_moved(const double* arr, int n, double w) {
    double sum = 0;
    for (int i = 0; i < n; ++i) {
        sum += arr[0] * (i + w);
        arr = arr + 1;
    }
    arr -= 2;
    sum += arr[0] * arr[1];
    return sum;
}
