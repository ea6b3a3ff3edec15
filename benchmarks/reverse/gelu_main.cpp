// Reverse-sweep benchmark of gelu_forward (tanh GELU, csrc/kernels/gelu.cpp); see harness.h.
// Size: -DBENCH_N (default 4 * 64 * 3072, the GPT-2 small MLP activation at B = 4, T = 64).
#include "reverse/harness.h"

#ifndef BENCH_N
#define BENCH_N (4 * 64 * 3072)
#endif
// The sweep timed: the accumulating one (Clad's contract: it adds into d inp and zeroes the
// seed as it reads it), or, from gelu_assign_main.cpp, the assigning variant the op's backward
// runs (it writes d inp and only reads the seed).
#ifndef GELU_SWEEP
#define GELU_SWEEP gelu_forward_reverse_sweep
#endif

struct GeluCase {
    int N = BENCH_N;
    std::vector<float> inp, out, seed, g_inp, g_out, h_inp;

    GeluCase() : inp(N), out(N), seed(N), g_inp(N), g_out(N), h_inp(N) {
        bench::fill(inp, -4.0f, 4.0f, 1);
        bench::fill(seed, -1.0f, 1.0f, 2);
    }
    void reset() {
        bench::zero(g_inp);
        bench::zero(h_inp);
        g_out = seed;
    }
    void forward() { gelu_forward(out.data(), inp.data(), N); }
    void hand_backward() { gelu_backward(h_inp.data(), inp.data(), seed.data(), N); }
    void aug_forward(torchclad::Tape& tape) { gelu_forward_reverse_forw(out.data(), inp.data(), N, tape); }
    void sweep(torchclad::Tape& tape) {
        GELU_SWEEP(out.data(), inp.data(), N, g_inp.data(), g_out.data(), tape);
    }
    std::vector<bench::Grad> grads() { return {{"inp", g_inp.data(), h_inp.data(), g_inp.size()}}; }
    std::string sizes_json() { return "{\"N\": " + std::to_string(N) + "}"; }
};

int main(int argc, char** argv) {
    GeluCase c;
    return bench::main_for("gelu", c, argc, argv);
}
