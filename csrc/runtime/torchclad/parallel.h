// torchclad runtime: what generated `#pragma omp parallel for` loops use.
//
// IterRecords -- per-iteration tape records of a parallel recording forward.
//   A parallel loop whose iterations record values (loop counts, saved locals, a callee's
//   records) cannot push them on the one shared tape. Each iteration records on its thread's
//   own Tape instead, and the offset table says where iteration k's record starts and ends:
//
//     torchclad::IterRecords rec(n);                 // n iterations
//     #pragma omp parallel for
//     for (...) { torchclad::Tape& _tape = rec.record(k); ... pushes ... }
//     rec.save(tape);                                // every record onto the shared tape
//
//   and the reverse sweep, in any order and on any number of threads:
//
//     torchclad::IterRecords rec = torchclad::IterRecords::load(tape);
//     #pragma omp parallel for
//     for (...) { torchclad::Tape& _tape = rec.replay(k); ... pops ... }
//
//   save() lays the records out in iteration order (not thread order), so what the reverse
//   reads does not depend on how many threads recorded it. Records are copied as raw tape
//   cells: under TORCHCLAD_TAPE_DEBUG the pops inside an iteration are not type-checked
//   against its pushes.
//
// par_chunks / par_begin / par_combine -- deterministic partial sums.
//   A parallel reverse loop whose iterations all add into the same adjoint elements (the
//   gradient of weights every row reads) runs in a fixed number of chunks of consecutive
//   iterations, chosen from the trip count and the size of the partial sums only (never
//   from the thread count). Each chunk adds into its own zeroed copy; par_combine then adds
//   the chunks' sums into the adjoint in chunk order. The result is the same bits for every
//   number of threads: no atomics, no OpenMP reduction (whose combining order varies).
//
// elementwise_chunk -- the schedule of an elementwise loop whose bits must not depend on
//   the thread count:  #pragma omp parallel for schedule(static, elementwise_chunk(N))
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tape.h"

namespace torchclad {

class IterRecords {
 public:
  // A forward of n iterations; `threads` is at least the team size of the loop (0: the
  // default team size).
  explicit IterRecords(long n, long threads = 0)
      : tapes_(threads > static_cast<long>(ThreadTapes::default_threads())
                   ? static_cast<std::size_t>(threads)
                   : ThreadTapes::default_threads()),
        n_(n > 0 ? n : 0),
        tid_(static_cast<std::size_t>(n_), 0),
        begin_(static_cast<std::size_t>(n_), 0),
        end_(static_cast<std::size_t>(n_), 0),
        last_(tapes_.size(), -1) {}

  IterRecords(IterRecords&&) noexcept = default;
  IterRecords& operator=(IterRecords&&) noexcept = default;
  IterRecords(const IterRecords&) = delete;
  IterRecords& operator=(const IterRecords&) = delete;

  // Forward, at the start of iteration k (0 <= k < n): the tape it records on.
  Tape& record(long k) {
    const std::size_t t = ThreadTapes::thread_index();
    Tape& tape = tapes_.local();
    const std::size_t at = tape.size_bytes() / sizeof(std::uint64_t);
    if (last_[t] >= 0) end_[static_cast<std::size_t>(last_[t])] = at;
    last_[t] = k;
    tid_[static_cast<std::size_t>(k)] = static_cast<std::uint32_t>(t);
    begin_[static_cast<std::size_t>(k)] = at;
    return tape;
  }

  // Forward, after the loop: every iteration's record onto `tape`, in iteration order.
  void save(Tape& tape) {
    std::vector<std::vector<std::uint64_t>> cells(tapes_.size());
    for (std::size_t t = 0; t < tapes_.size(); ++t) {
      const std::size_t n = tapes_[t].size_bytes() / sizeof(std::uint64_t);
      if (last_[t] >= 0) end_[static_cast<std::size_t>(last_[t])] = n;
      cells[t].resize(n);
      tapes_[t].pop_array(cells[t].data(), n);
    }
    offsets_.assign(static_cast<std::size_t>(n_) + 1, 0);
    for (std::size_t k = 0; k < static_cast<std::size_t>(n_); ++k)
      offsets_[k + 1] = offsets_[k] + static_cast<long>(end_[k] - begin_[k]);
    data_.resize(static_cast<std::size_t>(offsets_.back()));
    for (std::size_t k = 0; k < static_cast<std::size_t>(n_); ++k) {
      const std::vector<std::uint64_t>& from = cells[tid_[k]];
      for (std::size_t c = begin_[k]; c < end_[k]; ++c)
        data_[static_cast<std::size_t>(offsets_[k]) + c - begin_[k]] = from[c];
    }
    tape.push_array(data_.data(), data_.size());
    tape.push_array(offsets_.data(), offsets_.size());
    tape.push(static_cast<long>(data_.size()));
    tape.push(n_);
  }

  // Reverse: the records `save` put on `tape`.
  static IterRecords load(Tape& tape) {
    IterRecords r(0);
    r.n_ = tape.pop<long>();
    const long cells = tape.pop<long>();
    r.offsets_.resize(static_cast<std::size_t>(r.n_) + 1);
    tape.pop_array(r.offsets_.data(), r.offsets_.size());
    r.data_.resize(static_cast<std::size_t>(cells));
    tape.pop_array(r.data_.data(), r.data_.size());
    return r;
  }

  // Reverse, at the start of iteration k's reverse: a tape holding exactly its record.
  Tape& replay(long k) {
    Tape& tape = tapes_.local();
    tape.clear();
    const std::size_t at = static_cast<std::size_t>(offsets_[static_cast<std::size_t>(k)]);
    const std::size_t end = static_cast<std::size_t>(offsets_[static_cast<std::size_t>(k) + 1]);
    tape.push_array(data_.data() + at, end - at);
    return tape;
  }

  long size() const noexcept { return n_; }

 private:
  ThreadTapes tapes_;
  long n_;
  std::vector<std::uint32_t> tid_;        // forward: the thread that recorded iteration k
  std::vector<std::size_t> begin_, end_;  // forward: its cells in that thread's tape
  std::vector<long> last_;                // forward: the last iteration each thread began
  std::vector<long> offsets_;             // iteration k's cells: data_[offsets_[k], offsets_[k+1])
  std::vector<std::uint64_t> data_;
};

// Number of chunks of a parallel reverse loop of n iterations whose partial sums hold
// `elements` values per chunk: at most 16, fewer when n is smaller or the partial sums would
// exceed 2^22 values in all -- except that two chunks of up to 2^22 values each are allowed
// (a loop that can use two threads does). `work` (when the engine knows it, else 0): the
// innermost iterations one iteration runs; then the chunks' partial sums, zeroed and added up
// once each (2 k elements passes), stay within half of the loop's own n * work. A count cut by
// either limit is rounded down to a power of two, so that 2, 4 or 8 threads get equal shares
// of the chunks (7 chunks at two threads ran 4 : 3, and held 7 copies for it). Depends on the
// sizes only, so the summation order does too. Measured on llm.c's tiled matmul_forward
// (benchmarks/bench_llmc.py, d weight of OC x C values summed over the rows), two threads: at
// OC = 3072 the 2^22 limit gave one chunk, the sweep ran serially, 1.52x llm.c's parallel
// backward; two chunks: 0.83x (0.71x -> 0.79x at one thread, for the copy). At OC = 768,
// 4 chunks instead of 7: 1.20x -> 1.03x (8 chunks: 1.09x).
inline long par_chunks(long n, long elements, long work = 0) {
  if (n <= 0) return 0;
  const long most = n < 16 ? n : 16;
  long k = most;
  if (elements > 0) {
    long cap = (1L << 22) / elements;
    if (cap < 2) cap = elements <= (1L << 22) ? 2 : 1;
    if (k > cap) k = cap;
    if (work > 0) {
      const double budget = static_cast<double>(n) * static_cast<double>(work) /
                            (4.0 * static_cast<double>(elements));
      const long w = budget < 1.0 ? 1 : budget > 16.0 ? 16 : static_cast<long>(budget);
      if (k > w) k = w;
    }
  }
  if (k == most) return k;
  long p = 1;
  while (p * 2 <= k) p *= 2;
  return p;
}

// First iteration of chunk c of k chunks over n iterations (chunk c covers
// [par_begin(c), par_begin(c + 1))).
inline long par_begin(long c, long n, long k) {
  return (n / k) * c + (c < n % k ? c : n % k);
}

// dst[j] += the k chunks' partial sums of element j, added in chunk order; untouched elements
// (every partial sum exactly zero) are left alone. A null dst (an absent adjoint) is skipped.
template <class T>
void par_combine(T* dst, const T* parts, long k, long elements) {
  if (dst == nullptr || k <= 0) return;
  // In blocks of kBlock elements, the chunks outer and the elements inner (vectorises): each
  // element's sum is still parts[j] + parts[elements + j] + ... in chunk order.
  constexpr long kBlock = 256;
  const long blocks = (elements + kBlock - 1) / kBlock;
#ifdef _OPENMP
#pragma omp parallel for if (elements >= 8192)
#endif
  for (long b = 0; b < blocks; ++b) {
    const long lo = b * kBlock, n = elements - lo < kBlock ? elements - lo : kBlock;
    T s[kBlock];
    for (long j = 0; j < n; ++j) s[j] = parts[lo + j];
    for (long c = 1; c < k; ++c) {
      const T* p = parts + c * elements + lo;
      for (long j = 0; j < n; ++j) s[j] += p[j];
    }
    for (long j = 0; j < n; ++j)
      if (s[j] != T(0)) dst[lo + j] += s[j];
  }
}

// Chunk size of an elementwise parallel loop of n iterations: one chunk of consecutive
// iterations per thread, each chunk starting at a multiple of 64. Then every element runs
// through the same code path whatever the thread count: the vectorised loop and its scalar
// remainder split the elements the same way when every chunk starts at a multiple of the
// vector width, and libmvec's vector exp / erf / tanh and libm's scalar ones may differ in the
// last bit (with the default schedule, N = 10007 at two threads put elements of SiLU in the
// scalar remainder of one chunk that are vector lanes at one thread). One chunk per thread,
// not chunks of 64 dealt out in turn: a thread's elements are the ones the loop before it (a
// GEMM split by rows) left in that core's cache, and the threads share no cache line; dealt
// out by 64, the fused demo model's GELU took 5-7x its one-thread time at two threads (perf,
// AMD EPYC).
inline int elementwise_chunk(long n) {
#ifdef _OPENMP
  const long threads = omp_get_max_threads();
#else
  const long threads = 1;
#endif
  const long per = (n + threads - 1) / threads;
  return per <= 64 ? 64 : static_cast<int>((per + 63) / 64 * 64);
}

}  // namespace torchclad
