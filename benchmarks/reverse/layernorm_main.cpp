// Reverse-sweep benchmark of layernorm_forward (csrc/kernels/layernorm.cpp); see harness.h.
// Sizes: -DBENCH_B, -DBENCH_T, -DBENCH_C (default the GPT-2 small layer: 4, 64, 768).
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

struct LayerNormCase {
    int N = BENCH_B * BENCH_T, C = BENCH_C;
    float eps = 1e-5f;
    std::vector<float> inp, weight, bias, out, mean, rstd, seed;
    std::vector<float> g_inp, g_weight, g_bias, g_out, g_mean, g_rstd;  // generated adjoints
    std::vector<float> h_inp, h_weight, h_bias;                         // hand-written ones

    LayerNormCase()
        : inp(N * C), weight(C), bias(C), out(N * C), mean(N), rstd(N), seed(N * C),
          g_inp(N * C), g_weight(C), g_bias(C), g_out(N * C), g_mean(N), g_rstd(N),
          h_inp(N * C), h_weight(C), h_bias(C) {
        bench::fill(inp, -2.0f, 2.0f, 1);
        bench::fill(weight, 0.5f, 1.5f, 2);
        bench::fill(bias, -0.5f, 0.5f, 3);
        bench::fill(seed, -1.0f, 1.0f, 4);
    }
    void reset() {
        for (auto* v : {&g_inp, &g_weight, &g_bias, &g_mean, &g_rstd, &h_inp, &h_weight, &h_bias})
            bench::zero(*v);
        g_out = seed;  // the sweep consumes (zeroes) its output adjoints
    }
    void forward() {
        layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(),
                          bias.data(), N, C, eps);
    }
    void hand_backward() {
        layernorm_backward(h_inp.data(), h_weight.data(), h_bias.data(), seed.data(), inp.data(),
                           weight.data(), mean.data(), rstd.data(), N, C);
    }
    void aug_forward(torchclad::Tape& tape) {
        layernorm_forward_reverse_forw(out.data(), mean.data(), rstd.data(), inp.data(),
                                       weight.data(), bias.data(), N, C, eps, tape);
    }
    void sweep(torchclad::Tape& tape) {
        layernorm_forward_reverse_sweep(out.data(), mean.data(), rstd.data(), inp.data(),
                                        weight.data(), bias.data(), N, C, eps, g_inp.data(),
                                        g_weight.data(), g_bias.data(), g_out.data(),
                                        g_mean.data(), g_rstd.data(), tape);
    }
    std::vector<bench::Grad> grads() {
        return {{"inp", g_inp.data(), h_inp.data(), g_inp.size()},
                {"weight", g_weight.data(), h_weight.data(), g_weight.size()},
                {"bias", g_bias.data(), h_bias.data(), g_bias.size()}};
    }
    std::string sizes_json() {
        return "{\"B\": " + std::to_string(BENCH_B) + ", \"T\": " + std::to_string(BENCH_T) +
               ", \"C\": " + std::to_string(C) + "}";
    }
};

int main(int argc, char** argv) {
    LayerNormCase c;
    return bench::main_for("layernorm", c, argc, argv);
}
