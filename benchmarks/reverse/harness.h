// Shared driver of the reverse-sweep benchmark programs (benchmarks/bench_reverse.py).
//
// One program per kernel = the engine's translation unit for the kernel (forward, generated
// reverse_forw / reverse_sweep) + a hand-written backward (benchmarks/oracles/) + a small
// `main` that defines a Case and calls bench::main_for<Case>. A Case owns every buffer and has
//
//   void reset();                         zero every adjoint, reseed the output adjoints
//   void forward();                       the primal kernel
//   void hand_backward();                 the hand-written backward (reads forward()'s outputs)
//   void aug_forward(torchclad::Tape&);   the generated <f>_reverse_forw
//   void sweep(torchclad::Tape&);         the generated <f>_reverse_sweep
//   std::vector<Grad> grads();            (name, generated adjoint, hand-written adjoint, n)
//   std::string sizes_json();             the problem sizes, as a JSON object
//
// Timing: `rounds` rounds; a round runs the hand half (reset, forward, hand_backward) and the
// generated half (reset, fresh tape, aug_forward, sweep) in alternating order, each call timed
// on its own, by the wall clock (steady_clock) and by the process's CPU clock
// (CLOCK_PROCESS_CPUTIME_ID, all threads: the CPU clock does not count the time spent
// descheduled, which on the shared benchmark machine is most of the noise); reset() and tape
// destruction are never timed. Interleaving keeps both halves under the same machine load.
// bench_reverse.py runs the programs with OMP_NUM_THREADS=1 (kernels with `omp parallel for`
// and their generated sweeps then run on one thread, like the hand-written backwards): the
// comparison is per core; "omp_threads" in the output says what ran.
//
// Check: before timing, one hand half and one generated half; every adjoint pair must agree to
// max|gen - hand| <= tol * max|hand| (tol = 1e-5), else the program prints the errors and exits 3.
// A Case may also define `std::vector<std::vector<double>> reference()`: float64 adjoints, in
// grads() order, computed independently. Then the oracle is trusted when max|hand - ref| <=
// tol * max|ref|, and the generated adjoints' own error against the reference is reported
// (not failed on): that separates an oracle bug from the generated code's float32 roundoff.
//
// Output: one JSON object on stdout (bench_reverse.py parses it), per-call times in seconds.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace bench {

struct Grad {
    std::string name;
    const float* generated;
    const float* hand;
    std::size_t n;
};

inline double now() {
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

inline double cpu_now() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Wall and thread-CPU seconds of one call.
struct Sample {
    std::vector<double> wall, cpu;
    template <class F>
    double operator()(F&& f) {
        double c0 = cpu_now(), w0 = now();
        f();
        double w = now() - w0, c = cpu_now() - c0;
        wall.push_back(w);
        cpu.push_back(c);
        return c;
    }
    void clear() { wall.clear(); cpu.clear(); }
};

// Deterministic fill, uniform in [lo, hi).
inline void fill(std::vector<float>& v, float lo, float hi, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(lo, hi);
    for (float& x : v) x = u(rng);
}

inline void zero(std::vector<float>& v) { std::fill(v.begin(), v.end(), 0.0f); }

// max |a - b| / max |b| (0 when b is all zero and a equals it).
struct Err {
    double max_abs;
    double rel;
    double ref_max;
};

template <class R>
inline Err compare(const float* got, const R* ref, std::size_t n) {
    double m = 0, r = 0;
    for (std::size_t i = 0; i < n; i++) {
        double d = std::fabs(double(got[i]) - double(ref[i]));
        if (!(d <= m)) m = d;  // NaN propagates
        r = std::max(r, std::fabs(double(ref[i])));
    }
    return {m, r > 0 ? m / r : m, r};
}

inline std::string err_json(const Err& e) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "{\"max_abs\": %.3g, \"rel\": %.3g, \"ref_max\": %.3g}",
                  e.max_abs, e.rel, e.ref_max);
    return buf;
}

template <class C, class = void>
struct has_reference : std::false_type {};
template <class C>
struct has_reference<C, std::void_t<decltype(std::declval<C&>().reference())>> : std::true_type {};

inline void print_series(const char* name, const std::vector<double>& s, bool last) {
    std::printf("\"%s\": [", name);
    for (std::size_t i = 0; i < s.size(); i++) std::printf("%s%.9g", i ? ", " : "", s[i]);
    std::printf("]%s", last ? "" : ", ");
}

struct Args {
    int rounds = 30;
    double min_seconds = 1.0;  // keep going past `rounds` until the generated sweep took this long
    int max_rounds = 400;
    int warmup = 2;            // untimed rounds first
    double tol = 1e-5;
};

inline Args parse(int argc, char** argv) {
    Args a;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i];
        double v = std::atof(argv[i + 1]);
        if (k == "--rounds") a.rounds = int(v);
        else if (k == "--min-seconds") a.min_seconds = v;
        else if (k == "--max-rounds") a.max_rounds = int(v);
        else if (k == "--tol") a.tol = v;
        else if (k == "--warmup") a.warmup = int(v);
        else {
            std::fprintf(stderr, "unknown option %s (known: --rounds --min-seconds --max-rounds --warmup --tol)\n",
                         k.c_str());
            std::exit(2);
        }
    }
    return a;
}

template <class Case>
int main_for(const char* kernel, Case& c, int argc, char** argv) {
    Args args = parse(argc, argv);

    // --- check: generated vs hand-written adjoints, same seeds
    std::size_t tape_bytes = 0;
    c.reset();
    c.forward();
    c.hand_backward();
    {
        torchclad::Tape tape;
        c.aug_forward(tape);
        tape_bytes = tape.size_bytes();
        c.sweep(tape);
        if (!tape.empty()) {
            std::fprintf(stderr, "%s: the sweep left values on the tape\n", kernel);
            return 3;
        }
    }
    bool ok = true;
    std::string check = "{";
    std::vector<Grad> gs = c.grads();
    std::vector<std::vector<double>> ref;
    if constexpr (has_reference<Case>::value) ref = c.reference();
    for (std::size_t k = 0; k < gs.size(); k++) {
        const Grad& g = gs[k];
        Err e = compare(g.generated, g.hand, g.n);
        std::string entry = "\"" + g.name + "\": {\"gen_vs_hand\": " + err_json(e);
        bool good = e.rel <= args.tol;
        if (!ref.empty()) {
            Err eh = compare(g.hand, ref[k].data(), g.n);
            Err eg = compare(g.generated, ref[k].data(), g.n);
            entry += ", \"hand_vs_f64\": " + err_json(eh) + ", \"gen_vs_f64\": " + err_json(eg);
            good = eh.rel <= args.tol;  // the oracle is judged against the float64 reference
            if (!good)
                std::fprintf(stderr, "%s: hand-written d %s differs from the float64 reference: rel %.3g > %.1g\n",
                             kernel, g.name.c_str(), eh.rel, args.tol);
        } else if (!good) {
            std::fprintf(stderr, "%s: d %s differs: max|gen - hand| = %.3g, max|hand| = %.3g (rel %.3g > %.1g)\n",
                         kernel, g.name.c_str(), e.max_abs, e.ref_max, e.rel, args.tol);
        }
        entry += good ? ", \"ok\": true}" : ", \"ok\": false}";
        check += (k ? ", " : "") + entry;
        ok = ok && good;
    }
    check += "}";
    if (!ok) return 3;

    // --- timing (the first `warmup` rounds are run the same way and dropped)
    Sample t_fwd, t_hand, t_aug, t_sweep;
    double swept = 0;
    for (int r = -args.warmup; r < args.max_rounds && (r < args.rounds || swept < args.min_seconds); r++) {
        if (r == 0) {
            for (Sample* t : {&t_fwd, &t_hand, &t_aug, &t_sweep}) t->clear();
            swept = 0;
        }
        auto hand_half = [&] {
            c.reset();
            t_fwd([&] { c.forward(); });
            t_hand([&] { c.hand_backward(); });
        };
        auto gen_half = [&] {
            c.reset();
            auto tape = std::make_unique<torchclad::Tape>();
            t_aug([&] { c.aug_forward(*tape); });
            swept += t_sweep([&] { c.sweep(*tape); });
        };
        if (r & 1) { gen_half(); hand_half(); } else { hand_half(); gen_half(); }
    }

#ifdef _OPENMP
    int omp_threads = omp_get_max_threads();
#else
    int omp_threads = 0;
#endif
    std::printf("{\"kernel\": \"%s\", \"sizes\": %s, \"tape_bytes\": %zu, \"omp_threads\": %d, \"check\": %s, \"tol\": %g, ",
                kernel, c.sizes_json().c_str(), tape_bytes, omp_threads, check.c_str(), args.tol);
    for (int cpu = 0; cpu < 2; cpu++) {
        std::printf(cpu ? "\"cpu_times\": {" : "\"times\": {");
        print_series("forward", cpu ? t_fwd.cpu : t_fwd.wall, false);
        print_series("hand_backward", cpu ? t_hand.cpu : t_hand.wall, false);
        print_series("reverse_forw", cpu ? t_aug.cpu : t_aug.wall, false);
        print_series("reverse_sweep", cpu ? t_sweep.cpu : t_sweep.wall, true);
        std::printf(cpu ? "}" : "}, ");
    }
    std::printf("}\n");
    return 0;
}

}  // namespace bench
