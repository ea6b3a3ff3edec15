// new / new[] / delete / delete[] of local buffers (Clad's Pointers.C newAndDeletePointer,
// structPointer): the memory is a local array the reverse sweep still reads.
struct Pair {
    double a, b;
};

double new_delete(double i, double j) {
    double* p = new double(i);
    double* r = new double[3]{i * j, j};
    Pair* q = new Pair{j, i};
    r[2] = *p + q->b * r[0];
    double sum = r[2] * q->a + r[1];
    delete p;
    delete[] r;
    delete q;
    return sum;
}
