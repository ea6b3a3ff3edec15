// Reverse-sweep benchmark of crossentropy_forward (csrc/kernels/crossentropy.cpp); see harness.h.
// Sizes: -DBENCH_B, -DBENCH_T, -DBENCH_V (default 4, 64, 50304: GPT-2's padded vocabulary).
#include "reverse/harness.h"

#ifndef BENCH_B
#define BENCH_B 4
#endif
#ifndef BENCH_T
#define BENCH_T 64
#endif
#ifndef BENCH_V
#define BENCH_V 50304
#endif

struct CrossEntropyCase {
    int N = BENCH_B * BENCH_T, V = BENCH_V;
    std::vector<float> logits, losses, seed, g_logits, g_losses, h_logits;
    std::vector<long> targets;

    CrossEntropyCase()
        : logits((long)N * V), losses(N), seed(N), g_logits((long)N * V), g_losses(N),
          h_logits((long)N * V), targets(N) {
        bench::fill(logits, -4.0f, 4.0f, 1);
        bench::fill(seed, 0.5f, 1.5f, 2);  // e.g. 1/N of a mean, scaled
        std::mt19937 rng(3);
        for (long& t : targets) t = long(rng() % unsigned(V));
    }
    void reset() {
        bench::zero(g_logits);
        bench::zero(h_logits);
        g_losses = seed;
    }
    void forward() { crossentropy_forward(losses.data(), logits.data(), targets.data(), N, V); }
    void hand_backward() {
        crossentropy_backward(h_logits.data(), logits.data(), targets.data(), losses.data(),
                              seed.data(), N, V);
    }
    void aug_forward(torchclad::Tape& tape) {
        crossentropy_forward_reverse_forw(losses.data(), logits.data(), targets.data(), N, V, tape);
    }
    void sweep(torchclad::Tape& tape) {
        crossentropy_forward_reverse_sweep(losses.data(), logits.data(), targets.data(), N, V,
                                           g_logits.data(), g_losses.data(), tape);
    }
    std::vector<bench::Grad> grads() {
        return {{"logits", g_logits.data(), h_logits.data(), g_logits.size()}};
    }
    // float64 d logits from the same float32 logits: a third opinion. At V = 50304 the generated
    // sweep's argmax term, dloss * (1 - sum_i p_i), is float32 roundoff of size ~sqrt(V) eps, so
    // generated and hand-written may differ by a little over 1e-5 relative; this shows which.
    std::vector<std::vector<double>> reference() {
        std::vector<double> d((long)N * V, 0.0);
        for (int n = 0; n < N; n++) {
            const float* x = logits.data() + (long)n * V;
            double* dx = d.data() + (long)n * V;
            double mx = x[0];
            for (int i = 1; i < V; i++) mx = std::max(mx, double(x[i]));
            double sum = 0;
            for (int i = 0; i < V; i++) sum += std::exp(double(x[i]) - mx);
            for (int i = 0; i < V; i++) dx[i] = double(seed[n]) * std::exp(double(x[i]) - mx) / sum;
            dx[targets[n]] -= double(seed[n]);
        }
        return {d};
    }
    std::string sizes_json() {
        return "{\"B\": " + std::to_string(BENCH_B) + ", \"T\": " + std::to_string(BENCH_T) +
               ", \"V\": " + std::to_string(V) + "}";
    }
};

int main(int argc, char** argv) {
    CrossEntropyCase c;
    return bench::main_for("crossentropy", c, argc, argv);
}
