// Runs one reverse-mode gradient of tests/checkpoint/ode.cpp and prints what the tests check:
//   ode_driver taped|checkpointed|every:K NSTEPS
// prints `grad=<hex floats>` (bit patterns of d y0 and d k), the tape's size after the
// forward sweep, the time of forward + reverse, its peak resident heap bytes, and the process's peak RSS (VmHWM: unlike
// getrusage's ru_maxrss it does not carry over the parent's peak across fork + exec).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <torchclad/runtime.h>

void ode_taped_reverse_forw(double*, const double*, int, int, double, torchclad::Tape&);
void ode_taped_reverse_sweep(double*, const double*, int, int, double, double*, double*,
                             torchclad::Tape&);
void ode_checkpointed_reverse_forw(double*, const double*, int, int, double, torchclad::Tape&);
void ode_checkpointed_reverse_sweep(double*, const double*, int, int, double, double*, double*,
                                    torchclad::Tape&);
void ode_every_reverse_forw(double*, const double*, int, int, double, int, torchclad::Tape&);
void ode_every_reverse_sweep(double*, const double*, int, int, double, int, double*, double*,
                             torchclad::Tape&);

static long peak_rss_kb() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  long kb = -1;
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::sscanf(line, "VmHWM: %ld kB", &kb) == 1) break;
  std::fclose(f);
  return kb;
}

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const int m = 4;
  const int nsteps = std::atoi(argv[2]);
  const double h = 1e-5;
  double y[2 * m], k[m], dy[2 * m], dk[m] = {0, 0, 0, 0};
  for (int j = 0; j < m; j++) {
    y[j] = 0.3 + 0.2 * j;
    y[m + j] = 0.1 * (j % 2 ? -1 : 1);
    k[j] = 1.0 + 0.25 * j;
  }
  for (int j = 0; j < 2 * m; j++) dy[j] = 1.0 / (j + 1);  // seed: d(sum y_final / (j+1))
  torchclad::Tape tape;
  std::size_t after_forward = 0;
  const auto t0 = std::chrono::steady_clock::now();
  if (std::strcmp(argv[1], "taped") == 0) {
    ode_taped_reverse_forw(y, k, m, nsteps, h, tape);
    after_forward = tape.size_bytes();
    ode_taped_reverse_sweep(y, k, m, nsteps, h, dy, dk, tape);
  } else if (std::strcmp(argv[1], "checkpointed") == 0) {
    ode_checkpointed_reverse_forw(y, k, m, nsteps, h, tape);
    after_forward = tape.size_bytes();
    ode_checkpointed_reverse_sweep(y, k, m, nsteps, h, dy, dk, tape);
  } else if (std::strncmp(argv[1], "every:", 6) == 0) {
    const int every = std::atoi(argv[1] + 6);
    ode_every_reverse_forw(y, k, m, nsteps, h, every, tape);
    after_forward = tape.size_bytes();
    ode_every_reverse_sweep(y, k, m, nsteps, h, every, dy, dk, tape);
  } else {
    return 2;
  }
  const double ms = std::chrono::duration<double, std::milli>(
      std::chrono::steady_clock::now() - t0).count();
  if (!tape.empty()) {
    std::printf("FAIL tape not empty after the sweep\n");
    return 1;
  }
  std::printf("OK grad=");
  for (int j = 0; j < 2 * m; j++) std::printf("%a,", dy[j]);
  for (int j = 0; j < m; j++) std::printf("%a,", dk[j]);
  std::printf(" tape_bytes=%zu peak_resident=%zu spilled=%zu rss_kb=%ld ms=%.2f\n",
              after_forward, tape.stats().peak_resident_bytes, tape.stats().bytes_spilled,
              peak_rss_kb(), ms);
  return 0;
}
