// Micro-benchmarks of torchclad::Tape, driven by benchmarks/bench_tape.py.
//
//   bench_tape throughput N REPS   push/pop N doubles: Tape vs std::vector tape
//   bench_tape small ITERS         short tapes (8 values) created per call
//   bench_tape rss N KIND          KIND = tape | vector; peak RSS of one
//                                  push N / pop N cycle (run in a fresh process;
//                                  TORCHCLAD_TAPE_MEMORY_LIMIT applies to tape)
//
// Output: one "key=value ..." line per measurement.
#include <torchclad/runtime.h>

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The doubling baseline: 8-byte cells in a std::vector (push_back/pop_back),
// i.e. what a tape built on std::vector<uint64_t> does.
class VectorTape {
 public:
  template <class V>
  void push(const V& v) {
    std::uint64_t c = 0;
    std::memcpy(&c, &v, sizeof(V));
    cells_.push_back(c);
  }
  template <class V>
  V pop() {
    V v;
    const std::uint64_t c = cells_.back();
    cells_.pop_back();
    std::memcpy(&v, &c, sizeof(V));
    return v;
  }
  bool empty() const { return cells_.empty(); }

 private:
  std::vector<std::uint64_t> cells_;
};

// noinline + tape by reference: the shape of generated reverse code.
template <class T>
__attribute__((noinline)) void forward(T& t, std::size_t n) {
  double x = 0.5;
  for (std::size_t i = 0; i < n; ++i) {
    t.push(x);
    x += 1.0;
  }
}

template <class T>
__attribute__((noinline)) double reverse(T& t, std::size_t n) {
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += t.template pop<double>();
  return s;
}

template <class T>
void throughput(const char* name, std::size_t n, int reps) {
  double best_push = 1e30, best_pop = 1e30, warm_push = 1e30, warm_pop = 1e30;
  double check = 0;
  for (int r = 0; r < reps; ++r) {
    T t;  // fresh tape: includes growth (allocation, page faults)
    auto t0 = Clock::now();
    forward(t, n);
    const double tp = seconds_since(t0);
    t0 = Clock::now();
    check += reverse(t, n);
    const double tq = seconds_since(t0);
    if (tp < best_push) best_push = tp;
    if (tq < best_pop) best_pop = tq;
    // Second cycle on the same tape (what a reused tape costs).
    t0 = Clock::now();
    forward(t, n);
    const double wp = seconds_since(t0);
    t0 = Clock::now();
    check += reverse(t, n);
    const double wq = seconds_since(t0);
    if (wp < warm_push) warm_push = wp;
    if (wq < warm_pop) warm_pop = wq;
  }
  const double expect = 2.0 * reps * (0.5 * static_cast<double>(n) + static_cast<double>(n) * (static_cast<double>(n) - 1) / 2);
  std::printf(
      "throughput impl=%s n=%zu push_ns=%.3f pop_ns=%.3f warm_push_ns=%.3f warm_pop_ns=%.3f "
      "ok=%d\n",
      name, n, best_push * 1e9 / static_cast<double>(n), best_pop * 1e9 / static_cast<double>(n),
      warm_push * 1e9 / static_cast<double>(n), warm_pop * 1e9 / static_cast<double>(n),
      check == expect ? 1 : 0);
}

template <class T>
__attribute__((noinline)) double small_call(double x) {
  T t;
  for (int i = 0; i < 8; ++i) t.push(x + i);
  double s = 0;
  for (int i = 0; i < 8; ++i) s += t.template pop<double>();
  return s;
}

template <class T>
void small(const char* name, std::size_t iters) {
  double best = 1e30, s = 0;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < iters; ++i) s += small_call<T>(static_cast<double>(i));
    const double dt = seconds_since(t0);
    if (dt < best) best = dt;
  }
  std::printf("small impl=%s iters=%zu ns_per_call=%.2f check=%g\n", name, iters,
              best * 1e9 / static_cast<double>(iters), s);
}

long peak_rss_kb() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

template <class T>
void rss_cycle(T& t, std::size_t n, double& push_s, double& pop_s, double& sum) {
  auto t0 = Clock::now();
  forward(t, n);
  push_s = seconds_since(t0);
  t0 = Clock::now();
  sum = reverse(t, n);
  pop_s = seconds_since(t0);
}

void rss(std::size_t n, const std::string& kind) {
  const long base = peak_rss_kb();
  double push_s = 0, pop_s = 0, sum = 0;
  torchclad::TapeStats st;
  std::size_t limit = 0;
  if (kind == "vector") {
    VectorTape t;
    rss_cycle(t, n, push_s, pop_s, sum);
  } else {
    torchclad::Tape t;
    rss_cycle(t, n, push_s, pop_s, sum);
    st = t.stats();
    limit = t.memory_limit();
  }
  const double mb = static_cast<double>(n) * 8 / 1e6;
  std::printf(
      "rss impl=%s n=%zu limit=%zu base_kb=%ld peak_kb=%ld push_mb_s=%.1f pop_mb_s=%.1f "
      "spilled_mb=%.1f loaded_mb=%.1f peak_resident_kb=%zu waits=%zu check=%.17g\n",
      kind.c_str(), n, limit, base, peak_rss_kb(), mb / push_s, mb / pop_s,
      static_cast<double>(st.bytes_spilled) / 1e6, static_cast<double>(st.bytes_loaded) / 1e6,
      st.peak_resident_bytes / 1024, st.prefetch_waits, sum);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "throughput";
  const std::size_t n = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 10000000;
  if (mode == "throughput") {
    const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
    throughput<torchclad::Tape>("tape", n, reps);
    throughput<VectorTape>("vector", n, reps);
  } else if (mode == "small") {
    small<torchclad::Tape>("tape", n);
    small<VectorTape>("vector", n);
  } else if (mode == "rss") {
    rss(n, argc > 3 ? argv[3] : "tape");
  } else {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }
  return 0;
}
