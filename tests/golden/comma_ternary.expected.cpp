void comma_ternary_pullback(double x, double y, double _d_y, double* _d_x, double* _d_y0) {
    torchclad::Tape _tape;
    double a = 0.0;
    double b = x;
    a = x * 2.0;
    b = a + y;
    double c = a > b ? a * y : b * x;
    {
        int i = 0;
        int j = 3;
        unsigned long _t0 = 0;
        for (; i < j; ++i, --j) {
            ++_t0;
            c += a * i - b * j;
        }
        _tape.push(_t0);
        _tape.push(i);
        _tape.push(j);
    }
    double _d_a = double(0);
    double _d_b = double(0);
    double _d_c = double(0);
    double _d_d = double(0);
    double _d_e = double(0);
    _d_c += _d_y;
    _d_d += _d_y;
    _d_e += _d_y;
    if (x > 0.5 && y < 3.0) {
        if (b > 0.0) {
            _d_b += _d_e * c;
        } else {
            _d_b += -(_d_e * c);
        }
        _d_c += (b > 0.0 ? b : -b) * _d_e;
    } else {
        _d_c += _d_e;
    }
    {
        int j = _tape.pop<int>();
        int i = _tape.pop<int>();
        for (unsigned long _t1 = _tape.pop<unsigned long>(); _t1; --_t1) {
            ++j;
            --i;
            _d_a += _d_c * i;
            _d_b += -_d_c * j;
        }
    }
    if (x < 0.0) {
        *_d_x += -_d_d;
    } else if (y > 1.0) {
        *_d_y0 += double(2) * (_d_d * y);
    } else {
        *_d_y0 += _d_d;
    }
    if (a > b) {
        _d_a += _d_c * y;
        *_d_y0 += a * _d_c;
    } else {
        _d_b += _d_c * x;
        *_d_x += b * _d_c;
    }
    double _r_d1 = _d_b;
    _d_b = 0;
    _d_a += _r_d1;
    *_d_y0 += _r_d1;
    double _r_d0 = _d_a;
    _d_a = 0;
    *_d_x += _r_d0 * 2.0;
    *_d_x += _d_b;
}

void comma_ternary_grad(double x, double y, double* _d_x, double* _d_y0) {
    comma_ternary_pullback(x, y, double(1), _d_x, _d_y0);
}

double comma_ternary_reverse_forw(double x, double y, torchclad::Tape& _tape) {
    double a = 0.0;
    double b = x;
    a = x * 2.0;
    b = a + y;
    double c = a > b ? a * y : b * x;
    double d = x < 0.0 ? -x : y > 1.0 ? y * y : y;
    {
        int i = 0;
        int j = 3;
        unsigned long _t0 = 0;
        for (; i < j; ++i, --j) {
            ++_t0;
            c += a * i - b * j;
        }
        _tape.push(_t0);
        _tape.push(i);
        _tape.push(j);
    }
    double e = x > 0.5 && y < 3.0 ? (b > 0.0 ? b : -b) * c : c;
    _tape.push(a);
    _tape.push(b);
    _tape.push(c);
    return c + d + e;
}

void comma_ternary_reverse_sweep(double x, double y, double _d_y, double* _d_x, double* _d_y0, torchclad::Tape& _tape) {
    double c = _tape.pop<double>();
    double b = _tape.pop<double>();
    double a = _tape.pop<double>();
    double _d_a = double(0);
    double _d_b = double(0);
    double _d_c = double(0);
    double _d_d = double(0);
    double _d_e = double(0);
    _d_c += _d_y;
    _d_d += _d_y;
    _d_e += _d_y;
    if (x > 0.5 && y < 3.0) {
        if (b > 0.0) {
            _d_b += _d_e * c;
        } else {
            _d_b += -(_d_e * c);
        }
        _d_c += (b > 0.0 ? b : -b) * _d_e;
    } else {
        _d_c += _d_e;
    }
    {
        int j = _tape.pop<int>();
        int i = _tape.pop<int>();
        for (unsigned long _t0 = _tape.pop<unsigned long>(); _t0; --_t0) {
            ++j;
            --i;
            _d_a += _d_c * i;
            _d_b += -_d_c * j;
        }
    }
    if (x < 0.0) {
        *_d_x += -_d_d;
    } else if (y > 1.0) {
        *_d_y0 += double(2) * (_d_d * y);
    } else {
        *_d_y0 += _d_d;
    }
    if (a > b) {
        _d_a += _d_c * y;
        *_d_y0 += a * _d_c;
    } else {
        _d_b += _d_c * x;
        *_d_x += b * _d_c;
    }
    double _r_d1 = _d_b;
    _d_b = 0;
    _d_a += _r_d1;
    *_d_y0 += _r_d1;
    double _r_d0 = _d_a;
    _d_a = 0;
    *_d_x += _r_d0 * 2.0;
    *_d_x += _d_b;
}
