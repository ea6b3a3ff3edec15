// Reverse-sweep benchmark of softmax_forward (csrc/kernels/softmax.cpp); see harness.h.
// Sizes: -DBENCH_ROWS (default 4 * 12 * 64 = B * NH * T), -DBENCH_C (default 64 = T): the
// attention softmax of GPT-2 small at B = 4, T = 64.
#include "reverse/harness.h"

#ifndef BENCH_ROWS
#define BENCH_ROWS (4 * 12 * 64)
#endif
#ifndef BENCH_C
#define BENCH_C 64
#endif
// The sweep timed: the accumulating one (it adds into d inp and zeroes the seed as it reads it),
// or, from softmax_assign_main.cpp, the variant the op's backward runs (each row of d inp
// zeroed by the sweep itself, then added into; the seed only read).
#ifndef SOFTMAX_SWEEP
#define SOFTMAX_SWEEP softmax_forward_reverse_sweep
#endif

struct SoftmaxCase {
    int N = BENCH_ROWS, C = BENCH_C;
    std::vector<float> inp, out, seed, g_inp, g_out, h_inp;

    SoftmaxCase() : inp(N * C), out(N * C), seed(N * C), g_inp(N * C), g_out(N * C), h_inp(N * C) {
        bench::fill(inp, -4.0f, 4.0f, 1);
        bench::fill(seed, -1.0f, 1.0f, 2);
    }
    void reset() {
        bench::zero(g_inp);
        bench::zero(h_inp);
        g_out = seed;
    }
    void forward() { softmax_forward(out.data(), inp.data(), N, C); }
    void hand_backward() { softmax_backward(h_inp.data(), out.data(), seed.data(), N, C); }
    void aug_forward(torchclad::Tape& tape) { softmax_forward_reverse_forw(out.data(), inp.data(), N, C, tape); }
    void sweep(torchclad::Tape& tape) {
        SOFTMAX_SWEEP(out.data(), inp.data(), N, C, g_inp.data(), g_out.data(), tape);
    }
    std::vector<bench::Grad> grads() { return {{"inp", g_inp.data(), h_inp.data(), g_inp.size()}}; }
    std::string sizes_json() {
        return "{\"rows\": " + std::to_string(N) + ", \"C\": " + std::to_string(C) + "}";
    }
};

int main(int argc, char** argv) {
    SoftmaxCase c;
    return bench::main_for("softmax", c, argc, argv);
}
