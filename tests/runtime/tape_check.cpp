// Test driver for torchclad/tape.h, run by tests/runtime/test_tape.py.
//
//   tape_check <case> [args...]
//
// Every case prints "OK ..." (plus key=value facts the Python side checks) and
// exits 0, or prints "FAIL ..." and exits 1.
#include <torchclad/runtime.h>

#include <sys/resource.h>
#include <sys/stat.h>

#include <csignal>
#include <system_error>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

// ---- allocation counter (replaces the global operator new/delete) ----------

static std::atomic<long> g_allocs{0};

// noinline: keeps GCC from pairing the inlined malloc/free with new/delete
// calls in the header and warning (-Wmismatched-new-delete).
#define REPLACED __attribute__((noinline))

REPLACED void* operator new(std::size_t n) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n != 0 ? n : 1)) return p;
  throw std::bad_alloc();
}
REPLACED void* operator new[](std::size_t n) { return ::operator new(n); }
REPLACED void* operator new(std::size_t n, std::align_val_t a) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  void* p = nullptr;
  std::size_t al = static_cast<std::size_t>(a);
  if (al < sizeof(void*)) al = sizeof(void*);
  if (posix_memalign(&p, al, n != 0 ? n : 1) != 0) throw std::bad_alloc();
  return p;
}
REPLACED void* operator new[](std::size_t n, std::align_val_t a) { return ::operator new(n, a); }
REPLACED void operator delete(void* p) noexcept { std::free(p); }
REPLACED void operator delete[](void* p) noexcept { std::free(p); }
REPLACED void operator delete(void* p, std::size_t) noexcept { std::free(p); }
REPLACED void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
REPLACED void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
REPLACED void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
REPLACED void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
REPLACED void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

// ---- helpers ---------------------------------------------------------------

using torchclad::Tape;

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      std::printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                \
      std::fflush(stdout);                                                       \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)

static std::uint64_t mix(std::uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

struct Pair16 {
  double a;
  std::int64_t b;
};
struct Bytes3 {
  unsigned char c[3];
};

enum Kind {
  kDouble, kFloat, kInt, kLong, kBool, kSizeT, kPtr, kChar, kShort, kPair16, kBytes3,
  kLongDouble, kFloatArray, kDoubleArray, kUChar, kNumKinds
};

// Item number `i` of stream `seed`: its kind and payload bits are pure
// functions of (seed, i), so a checker can regenerate what must come back.
static int kind_of(std::uint64_t seed, std::uint64_t i) {
  return static_cast<int>(mix(i * 2 + 1 + (seed << 40)) % kNumKinds);
}
static std::uint64_t bits_of(std::uint64_t seed, std::uint64_t i) {
  return mix(i * 2 + (seed << 40));
}

template <class T>
static T from_bits(std::uint64_t b) {
  T v;
  std::memset(&v, 0, sizeof(T));
  std::memcpy(&v, &b, sizeof(T) < 8 ? sizeof(T) : 8);
  return v;
}

template <class T>
static bool same_bits(const T& a, const T& b, std::size_t n = sizeof(T)) {
  return std::memcmp(&a, &b, n) == 0;
}

static std::size_t array_len(std::uint64_t b) { return static_cast<std::size_t>(b % 23); }

static void push_item(Tape& t, std::uint64_t seed, std::uint64_t i) {
  const std::uint64_t b = bits_of(seed, i);
  switch (kind_of(seed, i)) {
    case kDouble: t.push(from_bits<double>(b)); break;  // includes NaN payloads
    case kFloat: t.push(from_bits<float>(b)); break;
    case kInt: t.push(from_bits<int>(b)); break;
    case kLong: t.push(from_bits<long>(b)); break;
    case kBool: t.push(static_cast<bool>(b & 1)); break;
    case kSizeT: t.push(from_bits<std::size_t>(b)); break;
    case kPtr: t.push(reinterpret_cast<const double*>(static_cast<std::uintptr_t>(b))); break;
    case kChar: t.push(static_cast<char>(b)); break;
    case kShort: t.push(static_cast<short>(b)); break;
    case kPair16: t.push(Pair16{from_bits<double>(b), static_cast<std::int64_t>(mix(b))}); break;
    case kBytes3: t.push(from_bits<Bytes3>(b)); break;
    case kLongDouble: {
      long double v = 0;
      std::memset(&v, 0, sizeof v);
      std::uint64_t w[2] = {b, mix(b) & 0x7fff};
      std::memcpy(&v, w, 10);
      t.push(v);
      break;
    }
    case kFloatArray: {
      float a[32];
      const std::size_t n = array_len(b);
      for (std::size_t k = 0; k < n; ++k) a[k] = from_bits<float>(mix(b + k));
      t.push_array(a, n);
      break;
    }
    case kDoubleArray: {
      double a[32];
      const std::size_t n = array_len(b);
      for (std::size_t k = 0; k < n; ++k) a[k] = from_bits<double>(mix(b + k));
      t.push_array(a, n);
      break;
    }
    case kUChar: t.push(static_cast<unsigned char>(b)); break;
  }
}

// Pops item `i` (it must be on top) and checks type-for-type, bit-for-bit.
static bool pop_item(Tape& t, std::uint64_t seed, std::uint64_t i) {
  const std::uint64_t b = bits_of(seed, i);
  switch (kind_of(seed, i)) {
    case kDouble: { double v = t.pop<double>(); double e = from_bits<double>(b); return same_bits(v, e); }
    case kFloat: { float v = t.pop<float>(); float e = from_bits<float>(b); return same_bits(v, e); }
    case kInt: return t.pop<int>() == from_bits<int>(b);
    case kLong: return t.pop<long>() == from_bits<long>(b);
    case kBool: return t.pop<bool>() == static_cast<bool>(b & 1);
    case kSizeT: return t.pop<std::size_t>() == from_bits<std::size_t>(b);
    case kPtr:
      return t.pop<const double*>() ==
             reinterpret_cast<const double*>(static_cast<std::uintptr_t>(b));
    case kChar: return t.pop<char>() == static_cast<char>(b);
    case kShort: return t.pop<short>() == static_cast<short>(b);
    case kPair16: {
      Pair16 v = t.pop<Pair16>();
      Pair16 e{from_bits<double>(b), static_cast<std::int64_t>(mix(b))};
      return same_bits(v.a, e.a) && v.b == e.b;
    }
    case kBytes3: { Bytes3 v = t.pop<Bytes3>(); Bytes3 e = from_bits<Bytes3>(b); return same_bits(v, e); }
    case kLongDouble: {
      long double v = t.pop<long double>();
      std::uint64_t w[2] = {b, mix(b) & 0x7fff};
      return std::memcmp(&v, w, 10) == 0;
    }
    case kFloatArray: {
      float a[32];
      const std::size_t n = array_len(b);
      t.pop_array(a, n);
      for (std::size_t k = 0; k < n; ++k) {
        float e = from_bits<float>(mix(b + k));
        if (!same_bits(a[k], e)) return false;
      }
      return true;
    }
    case kDoubleArray: {
      double a[32];
      const std::size_t n = array_len(b);
      t.pop_array(a, n);
      for (std::size_t k = 0; k < n; ++k) {
        double e = from_bits<double>(mix(b + k));
        if (!same_bits(a[k], e)) return false;
      }
      return true;
    }
    case kUChar: return t.pop<unsigned char>() == static_cast<unsigned char>(b);
  }
  return false;
}

// Sawtooth LIFO: push n, pop n/3, push n/2, pop n/4, push n/4, pop everything,
// checking every value.  Returns the number of mismatches.  `mid` (optional)
// runs at the highest point.
template <class Mid>
static long sawtooth(Tape& t, std::uint64_t seed, std::uint64_t n, Mid&& mid) {
  std::vector<std::uint32_t> stack;  // item ids currently on the tape
  std::uint64_t next = 0;
  long bad = 0;
  auto push_k = [&](std::uint64_t k) {
    for (std::uint64_t j = 0; j < k; ++j) {
      push_item(t, seed, next);
      stack.push_back(static_cast<std::uint32_t>(next));
      ++next;
    }
  };
  auto pop_k = [&](std::uint64_t k) {
    for (std::uint64_t j = 0; j < k && !stack.empty(); ++j) {
      if (!pop_item(t, seed, stack.back())) ++bad;
      stack.pop_back();
    }
  };
  push_k(n);
  pop_k(n / 3);
  push_k(n / 2);
  mid();
  pop_k(n / 4);
  push_k(n / 4);
  pop_k(stack.size());
  if (!t.empty() || t.size_bytes() != 0) ++bad;
  return bad;
}

static long count_files(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return -1;
  long n = 0;
  while (const dirent* e = readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) ++n;
  }
  closedir(d);
  return n;
}

static bool path_exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

static std::uint64_t arg_u64(int argc, char** argv, int i, std::uint64_t dflt) {
  return argc > i ? std::strtoull(argv[i], nullptr, 10) : dflt;
}

// ---- cases -----------------------------------------------------------------

// Millions of mixed values over many slabs, with partial pops in between.
static int case_lifo(int argc, char** argv) {
  const std::uint64_t n = arg_u64(argc, argv, 2, 3000000);
  Tape t;
  std::size_t peak = 0;
  long bad = sawtooth(t, 7, n, [&] { peak = t.size_bytes(); });
  CHECK(bad == 0);
  const torchclad::TapeStats s = t.stats();
  std::printf("OK lifo n=%llu peak_bytes=%zu slabs=%zu\n", static_cast<unsigned long long>(n),
              peak, s.slab_allocations);
  if (n >= 3000000) {  // really crossed many slabs
    CHECK(peak >= (std::size_t{20} << 20));
    if (t.memory_limit() == 0) CHECK(s.slab_allocations >= 20);
  }
  // Popping from an empty tape is reported, not undefined.
  bool threw = false;
  try {
    (void)t.pop<double>();
  } catch (const std::out_of_range&) {
    threw = true;
  }
  CHECK(threw);
  return 0;
}

// A short tape lives in the inline buffer: no heap allocation at all.
static int case_small(int, char**) {
  const long before = g_allocs.load();
  for (int rep = 0; rep < 1000; ++rep) {
    Tape t;
    t.push(1.5);
    t.push(2.5f);
    t.push(3);
    t.push(4L);
    t.push(true);
    t.push(std::size_t{6});
    t.push(static_cast<const void*>(&t));
    float a[5] = {1, 2, 3, 4, 5};
    t.push_array(a, 5);
    float b[5] = {};
    t.pop_array(b, 5);
    CHECK(std::memcmp(a, b, sizeof a) == 0);
    CHECK(t.pop<const void*>() == static_cast<const void*>(&t));
    CHECK(t.pop<std::size_t>() == 6);
    CHECK(t.pop<bool>() == true);
    CHECK(t.pop<long>() == 4L);
    CHECK(t.pop<int>() == 3);
    CHECK(t.pop<float>() == 2.5f);
    CHECK(t.pop<double>() == 1.5);
    CHECK(t.empty());
  }
  // Exactly filling the inline buffer is still allocation-free.
  {
    Tape t;
    const std::size_t cells = Tape::kInlineBytes / 8;
    for (std::size_t i = 0; i < cells; ++i) t.push(static_cast<double>(i));
    CHECK(t.size_bytes() == Tape::kInlineBytes);
    CHECK(t.stats().slab_allocations == 0);
    for (std::size_t i = cells; i-- > 0;) CHECK(t.pop<double>() == static_cast<double>(i));
  }
  const long after = g_allocs.load();
  CHECK(after == before);
  // One more value than fits spills into exactly one heap slab.
  {
    Tape t;
    for (std::size_t i = 0; i <= Tape::kInlineBytes / 8; ++i) t.push(static_cast<double>(i));
    CHECK(t.stats().slab_allocations == 1);
    CHECK(g_allocs.load() > after);
    for (std::size_t i = Tape::kInlineBytes / 8 + 1; i-- > 0;) {
      CHECK(t.pop<double>() == static_cast<double>(i));
    }
  }
  std::printf("OK small allocs=%ld\n", after - before);
  return 0;
}

// Bulk push/pop of arrays: empty, odd byte counts, and arrays larger than a
// slab, interleaved with scalars.
static int case_array(int, char**) {
  Tape t;
  std::vector<std::vector<double>> ds;
  std::vector<std::vector<char>> cs;
  const std::size_t lens[] = {0, 1, 2, 3, 7, 13, 31, 32, 33, 511, 512, 513, 4099, 200000, 1000003};
  std::uint64_t k = 1;
  for (std::size_t n : lens) {
    std::vector<double> d(n);
    std::vector<char> c(n);
    for (std::size_t i = 0; i < n; ++i) {
      d[i] = from_bits<double>(mix(k++));
      c[i] = static_cast<char>(mix(k++));
    }
    t.push(static_cast<int>(n));
    t.push_array(d.data(), n);
    t.push(static_cast<short>(-1));
    t.push_array(c.data(), n);
    t.push(true);
    ds.push_back(std::move(d));
    cs.push_back(std::move(c));
  }
  const std::size_t total = t.size_bytes();
  for (std::size_t idx = ds.size(); idx-- > 0;) {
    const std::size_t n = ds[idx].size();
    std::vector<double> d(n + 1, 0.0);
    std::vector<char> c(n + 1, 0);
    CHECK(t.pop<bool>() == true);
    t.pop_array(c.data(), n);
    CHECK(t.pop<short>() == -1);
    t.pop_array(d.data(), n);
    CHECK(t.pop<int>() == static_cast<int>(n));
    CHECK(n == 0 || std::memcmp(d.data(), ds[idx].data(), n * sizeof(double)) == 0);
    CHECK(n == 0 || std::memcmp(c.data(), cs[idx].data(), n) == 0);
    CHECK(d[n] == 0.0 && c[n] == 0);  // nothing written past the end
  }
  CHECK(t.empty());
  // Arrays of structs and of mixed element sizes.
  Pair16 p[3] = {{1.0, 2}, {3.0, 4}, {5.0, 6}};
  t.push_array(p, 3);
  Bytes3 b3[5] = {{{1, 2, 3}}, {{4, 5, 6}}, {{7, 8, 9}}, {{10, 11, 12}}, {{13, 14, 15}}};
  t.push_array(b3, 5);
  Bytes3 b3o[5];
  t.pop_array(b3o, 5);
  CHECK(std::memcmp(b3, b3o, sizeof b3) == 0);
  Pair16 po[3];
  t.pop_array(po, 3);
  CHECK(po[2].a == 5.0 && po[2].b == 6 && po[0].a == 1.0);
  CHECK(t.empty());
  std::printf("OK array total_bytes=%zu\n", total);
  return 0;
}

// push/pop oscillating right at a slab boundary must not allocate.
static int case_oscillate(int, char**) {
  Tape t;
  // Boundary 1: inline buffer -> first heap slab.
  const std::size_t inline_cells = Tape::kInlineBytes / 8;
  for (std::size_t i = 0; i < inline_cells; ++i) t.push(static_cast<long>(i));
  const long allocs0 = g_allocs.load();
  for (int r = 0; r < 200000; ++r) {
    t.push(static_cast<double>(r));
    CHECK(t.pop<double>() == static_cast<double>(r));
  }
  CHECK(t.stats().slab_allocations == 1);
  const long allocs1 = g_allocs.load();
  CHECK(allocs1 - allocs0 <= 2);  // the first slab (header + data), once
  // Boundary 2: first heap slab full -> second slab; oscillate by 1..3 values,
  // including a 16-byte value that straddles the boundary.
  const std::size_t first_cells = Tape::kFirstSlabBytes / 8;
  for (std::size_t i = 0; i < first_cells; ++i) t.push(static_cast<long>(1000 + i));
  for (int r = 0; r < 200000; ++r) {
    const int depth = 1 + r % 3;
    for (int j = 0; j < depth; ++j) t.push(static_cast<float>(r * 4 + j));
    for (int j = depth; j-- > 0;) CHECK(t.pop<float>() == static_cast<float>(r * 4 + j));
    t.pop<long>();  // step below the boundary ...
    t.push(Pair16{static_cast<double>(r), r});  // ... and straddle it
    Pair16 q = t.pop<Pair16>();
    CHECK(q.a == static_cast<double>(r) && q.b == r);
    t.push(static_cast<long>(1000 + first_cells - 1));
  }
  CHECK(t.stats().slab_allocations == 2);
  CHECK(g_allocs.load() - allocs1 <= 2);
  for (std::size_t i = first_cells; i-- > 0;) CHECK(t.pop<long>() == static_cast<long>(1000 + i));
  for (std::size_t i = inline_cells; i-- > 0;) CHECK(t.pop<long>() == static_cast<long>(i));
  CHECK(t.empty());
  std::printf("OK oscillate allocs=%ld\n", g_allocs.load() - allocs0);
  return 0;
}

// One tape per OpenMP thread through ThreadTapes.
static int case_threads(int argc, char** argv) {
  const std::uint64_t n = arg_u64(argc, argv, 2, 400000);
  torchclad::ThreadTapes tapes;
  const std::size_t nt = tapes.size();
#ifdef _OPENMP
  CHECK(nt == static_cast<std::size_t>(omp_get_max_threads()));
#else
  CHECK(nt == 1);
#endif
  long bad = 0;
  // 1) Each thread runs its own sawtooth on its own tape.
#pragma omp parallel reduction(+ : bad)
  {
    Tape& t = tapes.local();
    bad += sawtooth(t, 100 + torchclad::ThreadTapes::thread_index(), n, [] {});
  }
  CHECK(bad == 0);
  // 2) Split across two parallel regions, as generated code does: the forward
  //    loop records (i, value) on the local tape; the reverse region pops each
  //    thread's tape to empty.
  const long m = static_cast<long>(n);
#pragma omp parallel for schedule(static)
  for (long i = 0; i < m; ++i) {
    Tape& t = tapes.local();
    t.push(from_bits<double>(mix(static_cast<std::uint64_t>(i))));
    t.push(i);
  }
  long popped = 0;
#pragma omp parallel reduction(+ : bad, popped)
  {
    Tape& t = tapes.local();
    long last = m;
    while (!t.empty()) {
      const long i = t.pop<long>();
      const double v = t.pop<double>();
      const double e = from_bits<double>(mix(static_cast<std::uint64_t>(i)));
      if (!same_bits(v, e) || i >= last) ++bad;
      last = i;
      ++popped;
    }
  }
  CHECK(bad == 0);
  CHECK(popped == m);
  CHECK(tapes.empty());
  std::string dirs;
  for (std::size_t i = 0; i < nt; ++i) {
    const torchclad::TapeStats s = tapes[i].stats();
    if (s.slabs_spilled > 0) dirs += " spilled" + std::to_string(i) + "=" + std::to_string(s.slabs_spilled);
  }
  std::printf("OK threads nt=%zu%s\n", nt, dirs.c_str());
  return 0;
}

// Disk offload with a small limit (TORCHCLAD_TAPE_MEMORY_LIMIT set by the caller).
static int case_spill(int argc, char** argv) {
  const std::uint64_t n = arg_u64(argc, argv, 2, 1000000);
  std::string dir;
  long max_files = 0;
  torchclad::TapeStats s;
  std::size_t limit = 0;
  {
    Tape t;
    limit = t.memory_limit();
    CHECK(limit > 0);
    long bad = sawtooth(t, 11, n, [&] {
      dir = t.spill_dir();
      max_files = count_files(dir);
    });
    CHECK(bad == 0);
    s = t.stats();
    CHECK(!dir.empty() && path_exists(dir));
    CHECK(count_files(dir) == 0);  // every file read back has been deleted
    // Leave some data on disk and some loads in flight, then destroy.
    for (std::uint64_t i = 0; i < n / 2; ++i) push_item(t, 12, i);
    for (std::uint64_t i = n / 2; i-- > n / 4;) CHECK(pop_item(t, 12, i));
    CHECK(count_files(dir) > 0);
  }
  CHECK(!path_exists(dir));  // directory and files removed by the destructor
  CHECK(max_files > 0);
  CHECK(s.slabs_spilled > 0 && s.slabs_loaded > 0);
  // Resident slab memory stays within the limit (the current slab plus one
  // reload may exceed only a limit below two slabs).
  CHECK(s.peak_resident_bytes <= limit);
  std::printf(
      "OK spill dir=%s max_files=%ld spilled=%zu loaded=%zu peak_resident=%zu limit=%zu "
      "waits=%zu\n",
      dir.c_str(), max_files, s.slabs_spilled, s.slabs_loaded, s.peak_resident_bytes, limit,
      s.prefetch_waits);
  return 0;
}

// Files are removed when an exception unwinds through the owner of the tape.
static void fill_and_throw(std::string& dir, long& files) {
  Tape t;
  for (std::uint64_t i = 0; i < 200000; ++i) push_item(t, 5, i);
  dir = t.spill_dir();
  files = count_files(dir);
  for (std::uint64_t i = 200000; i-- > 150000;) CHECK(pop_item(t, 5, i));  // loads in flight
  throw std::runtime_error("boom");
}

static int case_spill_exception(int, char**) {
  std::string dir;
  long files = 0;
  bool caught = false;
  try {
    fill_and_throw(dir, files);
  } catch (const std::runtime_error&) {
    caught = true;
  }
  CHECK(caught);
  CHECK(!dir.empty());
  CHECK(files > 0);
  CHECK(!path_exists(dir));
  std::printf("OK spill_exception dir=%s files=%ld\n", dir.c_str(), files);
  return 0;
}

// Moves keep the contents (inline, heap and spilled); clear() empties.
static int case_move(int, char**) {
  static_assert(!std::is_copy_constructible<Tape>::value, "Tape must not be copyable");
  static_assert(!std::is_copy_assignable<Tape>::value, "Tape must not be copyable");
  static_assert(std::is_nothrow_move_constructible<Tape>::value, "Tape must be movable");
  static_assert(std::is_nothrow_move_assignable<Tape>::value, "Tape must be movable");
  for (std::uint64_t n : {3ULL, 20ULL, 5000ULL, 300000ULL}) {
    Tape a;
    for (std::uint64_t i = 0; i < n; ++i) push_item(a, 3, i);
    Tape b(std::move(a));
    CHECK(a.empty());
    Tape c;
    c.push(1.0);
    c = std::move(b);
    CHECK(b.empty());
    for (std::uint64_t i = n; i-- > 0;) CHECK(pop_item(c, 3, i));
    CHECK(c.empty());
    // The moved-from tape is usable.
    a.push(42);
    CHECK(a.pop<int>() == 42);
  }
  Tape t;
  for (int i = 0; i < 100000; ++i) t.push(i);
  t.clear();
  CHECK(t.empty() && t.size_bytes() == 0);
  for (int i = 0; i < 1000; ++i) t.push(i);
  for (int i = 1000; i-- > 0;) CHECK(t.pop<int>() == i);
  std::printf("OK move\n");
  return 0;
}

static int case_parse(int, char**) {
  using torchclad::detail::parse_memory_limit;
  CHECK(parse_memory_limit(nullptr) == 0);
  CHECK(parse_memory_limit("") == 0);
  CHECK(parse_memory_limit("0") == 0);
  CHECK(parse_memory_limit("65536") == 65536);
  CHECK(parse_memory_limit(" 64K") == 65536);
  CHECK(parse_memory_limit("64KiB") == 65536);
  CHECK(parse_memory_limit("3m") == 3u << 20);
  CHECK(parse_memory_limit("2GB") == std::size_t{2} << 30);
  for (const char* badv : {"abc", "12X", "-5", "1.5M", "99999999999999999999999"}) {
    bool threw = false;
    try {
      parse_memory_limit(badv);
    } catch (const std::invalid_argument&) {
      threw = true;
    }
    CHECK(threw);
  }
  std::printf("OK parse\n");
  return 0;
}

// Random walk: long runs of pushes and pops in random proportions (so the top
// wanders up and down across slab, spill and reload boundaries), with the
// occasional move and clear().  Every popped value is checked.
static int case_random(int argc, char** argv) {
  const std::uint64_t steps = arg_u64(argc, argv, 2, 3000000);
  const std::uint64_t seed = arg_u64(argc, argv, 3, 1);
  Tape t;
  std::vector<std::uint32_t> stack;
  std::uint32_t next = 0;
  std::uint64_t rng = seed, done = 0;
  long bad = 0;
  std::size_t max_depth = 0;
  while (done < steps) {
    rng = mix(rng);
    const bool up = (rng & 0xff) < (stack.size() < 1000 ? 200 : 140);
    const std::uint64_t run_len = 1 + (rng >> 8) % ((rng >> 40) % 4 == 0 ? 50000 : 300);
    for (std::uint64_t j = 0; j < run_len; ++j, ++done) {
      if (up || stack.empty()) {
        push_item(t, seed, next);
        stack.push_back(next++);
      } else {
        if (!pop_item(t, seed, stack.back())) ++bad;
        stack.pop_back();
      }
    }
    if (stack.size() > max_depth) max_depth = stack.size();
    if ((rng >> 20) % 97 == 0) {
      Tape moved(std::move(t));
      t = std::move(moved);
    }
    if ((rng >> 28) % 1009 == 0) {
      t.clear();
      stack.clear();
    }
  }
  while (!stack.empty()) {
    if (!pop_item(t, seed, stack.back())) ++bad;
    stack.pop_back();
  }
  CHECK(bad == 0);
  CHECK(t.empty());
  const torchclad::TapeStats s = t.stats();
  std::printf("OK random max_depth=%zu spilled=%zu loaded=%zu waits=%zu peak_resident=%zu\n",
              max_depth, s.slabs_spilled, s.slabs_loaded, s.prefetch_waits,
              s.peak_resident_bytes);
  if (t.memory_limit() >= 65536) CHECK(s.peak_resident_bytes <= t.memory_limit());
  return 0;
}

// Spill I/O errors surface as exceptions from push; the values already on the
// tape stay intact and the files are still cleaned up.
//   io_error mkdtemp : $TMPDIR does not exist (spill directory cannot be made)
//   io_error write   : RLIMIT_FSIZE makes a spill write fail part way
static int case_io_error(int argc, char** argv) {
  const std::string what = argc > 2 ? argv[2] : "write";
  if (what == "write") {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit rl;
    rl.rlim_cur = rl.rlim_max = 200 * 1024;
    CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
  }
  std::string dir;
  std::uint64_t pushed = 0;
  std::string message;
  {
    Tape t;
    t.set_memory_limit(16 * 1024);
    try {
      for (; pushed < 2000000; ++pushed) {
        push_item(t, 9, pushed);
        if (dir.empty()) dir = t.spill_dir();
      }
    } catch (const std::system_error& e) {
      message = e.what();
    }
    CHECK(!message.empty());
    for (std::uint64_t i = pushed; i-- > 0;) CHECK(pop_item(t, 9, i));
    CHECK(t.empty());
  }
  CHECK(dir.empty() || !path_exists(dir));
  std::printf("OK io_error pushed=%llu spilled_dir=%d message=\"%s\"\n",
              static_cast<unsigned long long>(pushed), dir.empty() ? 0 : 1, message.c_str());
  return 0;
}

// With -DTORCHCLAD_TAPE_DEBUG a pop with the wrong type or count throws.
static int case_debug(int, char**) {
#ifdef TORCHCLAD_TAPE_DEBUG
  auto throws = [](auto&& f) {
    try {
      f();
    } catch (const std::logic_error&) {
      return true;
    }
    return false;
  };
  Tape t;
  t.push(1.0);
  CHECK(throws([&] { (void)t.pop<float>(); }));
  CHECK(t.pop<double>() == 1.0);  // the failed pop did not consume anything
  double a[3] = {1, 2, 3};
  t.push_array(a, 3);
  double b[4];
  CHECK(throws([&] { t.pop_array(b, 4); }));
  t.pop_array(b, 3);
  CHECK(b[2] == 3.0);
  CHECK(throws([&] { (void)t.pop<int>(); }));
  std::printf("OK debug checked=1\n");
#else
  std::printf("OK debug checked=0\n");
#endif
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::printf("usage: tape_check CASE [args]\n");
    return 2;
  }
  const std::string c = argv[1];
  if (c == "lifo") return case_lifo(argc, argv);
  if (c == "small") return case_small(argc, argv);
  if (c == "array") return case_array(argc, argv);
  if (c == "oscillate") return case_oscillate(argc, argv);
  if (c == "threads") return case_threads(argc, argv);
  if (c == "spill") return case_spill(argc, argv);
  if (c == "spill_exception") return case_spill_exception(argc, argv);
  if (c == "move") return case_move(argc, argv);
  if (c == "parse") return case_parse(argc, argv);
  if (c == "debug") return case_debug(argc, argv);
  if (c == "random") return case_random(argc, argv);
  if (c == "io_error") return case_io_error(argc, argv);
  std::printf("unknown case %s\n", c.c_str());
  return 2;
}
