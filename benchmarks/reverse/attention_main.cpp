// Reverse-sweep benchmark of attention_forward (csrc/kernels/attention.cpp); see harness.h.
// Sizes: -DBENCH_B, -DBENCH_T, -DBENCH_C, -DBENCH_NH (default 4, 64, 768, 12: GPT-2 small).
// Only d out is seeded; preatt and att are outputs of the kernel too, seeded 0 (as autograd
// does when nothing downstream uses them).
#include "reverse/harness.h"

#ifndef BENCH_B
#define BENCH_B 4
#endif
#ifndef BENCH_T
#define BENCH_T 64
#endif
#ifndef BENCH_C
#define BENCH_C 768
#endif
#ifndef BENCH_NH
#define BENCH_NH 12
#endif

struct AttentionCase {
    int B = BENCH_B, T = BENCH_T, C = BENCH_C, NH = BENCH_NH;
    std::vector<float> inp, out, preatt, att, seed, row;
    std::vector<float> g_inp, g_out, g_preatt, g_att, h_inp;

    AttentionCase()
        : inp(B * T * 3 * C), out(B * T * C), preatt(B * NH * T * T), att(B * NH * T * T),
          seed(B * T * C), row(T), g_inp(B * T * 3 * C), g_out(B * T * C),
          g_preatt(B * NH * T * T), g_att(B * NH * T * T), h_inp(B * T * 3 * C) {
        bench::fill(inp, -1.0f, 1.0f, 1);
        bench::fill(seed, -1.0f, 1.0f, 2);
    }
    void reset() {
        for (auto* v : {&g_inp, &g_preatt, &g_att, &h_inp}) bench::zero(*v);
        g_out = seed;
    }
    void forward() {
        attention_forward(out.data(), preatt.data(), att.data(), inp.data(), B, T, C, NH);
    }
    void hand_backward() {
        attention_backward(h_inp.data(), seed.data(), inp.data(), att.data(), row.data(), B, T, C, NH);
    }
    void aug_forward(torchclad::Tape& tape) {
        attention_forward_reverse_forw(out.data(), preatt.data(), att.data(), inp.data(), B, T, C,
                                       NH, tape);
    }
    void sweep(torchclad::Tape& tape) {
        attention_forward_reverse_sweep(out.data(), preatt.data(), att.data(), inp.data(), B, T, C,
                                        NH, g_inp.data(), g_out.data(), g_preatt.data(),
                                        g_att.data(), tape);
    }
    std::vector<bench::Grad> grads() { return {{"inp", g_inp.data(), h_inp.data(), g_inp.size()}}; }
    std::string sizes_json() {
        return "{\"B\": " + std::to_string(B) + ", \"T\": " + std::to_string(T) + ", \"C\": " +
               std::to_string(C) + ", \"NH\": " + std::to_string(NH) + "}";
    }
};

int main(int argc, char** argv) {
    AttentionCase c;
    return bench::main_for("attention", c, argc, argv);
}
