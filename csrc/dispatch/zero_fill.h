// zero_fill: zero a contiguous tensor, with streaming stores when it is far larger than the cache.
//
// An ordinary store to a line that is not in the cache first reads that line (the store
// allocates it), so zero-filling a buffer much larger than the last-level cache moves it through
// memory twice, and the result is evicted before anyone reads it anyway. Non-temporal stores
// write whole lines past the cache: the fused GPT-2 124M model's 0.5 GB gradient buffer took
// 36 ms to zero with `Tensor::zero_` at 2 threads on the 2-core Xeon, 13 ms with them (75 vs 35 ms
// at one thread). Below half the last-level cache the ordinary fill wins (at 16-43 MB on that
// machine: same fill time, and the first reader finds the buffer in cache), so it is kept there.
//
// The threads are torch's (at::parallel_for: torch.set_num_threads applies), each streaming its
// own run of 64-byte lines, then fencing its stores before it returns. Only for x86-64 (SSE2 is
// part of the baseline); elsewhere, and for a non-contiguous tensor, it is Tensor::zero_.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/variable.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace torchclad_dispatch {

// Bytes from which zero_fill streams: half the last-level cache (32 MiB if the C library does
// not know its size).
inline std::int64_t streaming_threshold() {
  static const std::int64_t bytes = [] {
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return llc > 0 ? static_cast<std::int64_t>(llc) / 2 : std::int64_t{32} << 20;
  }();
  return bytes;
}

#if defined(__SSE2__)
// Zero [p, p + n) bytes: ordinary stores up to the first 64-byte boundary and after the last,
// streaming stores of whole lines in between, split over torch's threads.
inline void stream_zero(char* p, std::int64_t n) {
  const std::uintptr_t addr = reinterpret_cast<std::uintptr_t>(p);
  std::int64_t head = static_cast<std::int64_t>((64 - addr % 64) % 64);
  if (head > n) head = n;
  std::memset(p, 0, static_cast<std::size_t>(head));
  char* body = p + head;
  const std::int64_t lines = (n - head) / 64;
  std::memset(body + lines * 64, 0, static_cast<std::size_t>(n - head - lines * 64));
  constexpr std::int64_t kGrain = (std::int64_t{1} << 20) / 64;  // 1 MiB per task at least
  at::parallel_for(0, lines, kGrain, [body](std::int64_t lo, std::int64_t hi) {
    const __m128i z = _mm_setzero_si128();
    for (std::int64_t l = lo; l < hi; ++l) {
      __m128i* q = reinterpret_cast<__m128i*>(body + l * 64);
      _mm_stream_si128(q, z);
      _mm_stream_si128(q + 1, z);
      _mm_stream_si128(q + 2, z);
      _mm_stream_si128(q + 3, z);
    }
    _mm_sfence();  // this thread's streaming stores are visible before the task ends
  });
}
#endif

// Zero `t`. streaming: 1 always stream (when the platform can), 0 never, -1 from the threshold.
// Returns whether it streamed.
inline bool zero_fill(at::Tensor& t, int streaming) {
  const std::int64_t bytes = t.numel() * static_cast<std::int64_t>(t.element_size());
  bool stream = streaming == 1 || (streaming == -1 && bytes >= streaming_threshold());
#if defined(__SSE2__)
  stream = stream && t.is_contiguous() && t.device().is_cpu() && bytes > 0;
  if (stream) {
    stream_zero(static_cast<char*>(t.data_ptr()), bytes);
    torch::autograd::impl::bump_version(t);  // an in-place write, as zero_ would count it
    return true;
  }
#else
  stream = false;
#endif
  t.zero_();
  return false;
}

}  // namespace torchclad_dispatch
