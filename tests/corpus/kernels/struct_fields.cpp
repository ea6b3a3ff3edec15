// Structs and classes with data members (Clad's adjoint structs): aggregate and default
// member initialisation, a nested struct, copies, a pointer to a struct, a simple
// constructor, and non-virtual member functions reading and writing fields.
struct Point {
    double x, y = 1.5;
    int tag = 3;
};

struct Segment {
    Point a, b;
    double weight;
};

class Spring {
public:
    Spring() = default;
    Spring(double k, double rest) : k(k), rest(rest * 2) {}
    double k = 1, rest = 0;
    double energy(double len) const { return 0.5 * k * (len - rest) * (len - rest); }
    void stiffen(double by) { k *= by; }
};

double struct_fields(double x, double y, double w) {
    Point p{x};
    Point q = p;
    q.y *= y;
    Segment s{{x, y, 1}, q, w};
    Point* end = &s.b;
    end->x += s.a.y * w;
    s.a = *end;
    Spring sp(w, x);
    sp.stiffen(y);
    return sp.energy(s.a.x + s.b.y) + s.weight * p.y + end->tag;
}
