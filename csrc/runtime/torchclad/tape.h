// torchclad runtime: the tape used by generated reverse-mode code.
//
// A Tape is a LIFO of trivially copyable values of mixed types.  Generated
// code pushes the values it overwrites during the forward sweep and pops them,
// in exact reverse order and with the same types, during the reverse sweep.
//
// Layout
//   * Values live in 8-byte cells (std::uint64_t).  A scalar of up to 8 bytes
//     takes one cell; larger values and arrays take ceil(bytes / 8) cells, the
//     unused tail bytes are zeroed.  Every cell is 8-byte aligned, which is the
//     natural alignment of every scalar the engine records.
//   * The first kInlineBytes live inside the Tape object (no heap allocation
//     for short tapes).  Beyond that, storage is a doubly linked list of heap
//     slabs that grow geometrically (4 KiB .. 1 MiB).  Growing never moves or
//     copies stored data.  A value may straddle a slab boundary; only the slow
//     path handles that.
//   * When popping empties a slab, the slab is kept as a spare (at most one)
//     so that push/pop oscillating around a boundary does not call malloc.
//
// Fast path: push = compare + store + pointer bump, pop = compare + pointer
// decrement + load.  Everything else (new slab, spill to disk, reload) sits
// in out-of-line cold functions reached only when a slab boundary is crossed.
//
// Memory limit (multi-layer storage)
//   If TORCHCLAD_TAPE_MEMORY_LIMIT is set (bytes; optional K/M/G suffix,
//   powers of 1024; 0 or empty = unlimited) or set_memory_limit() was called,
//   the heap slabs of one tape that are resident in memory are kept within the
//   limit.  Slabs are then about limit/4 (a power of two, 4 KiB .. 1 MiB); the
//   current slab and the one being read back are always allowed, so only a
//   limit below two slabs (8 KiB) can be exceeded.  The oldest full slabs are
//   written to files in a private directory created with mkdtemp (mode 0700)
//   under $TMPDIR (default /tmp; use a disk, not a tmpfs).  Spilled slabs are
//   a stack, so they are stored one after another in segment files of 64
//   slabs (64 MiB for 1 MiB slabs); a segment file is deleted as soon as the
//   reverse sweep has read back its first slab.  A background thread reads
//   slabs back ahead of the pops.  The directory and any remaining files are
//   removed when the tape is cleared or destroyed (also during stack
//   unwinding).  Values come back bit-identical.  The environment variable is
//   read lazily, when the first heap slab is needed, so short tapes never call
//   getenv.  Each tape has its own limit, directory and loader thread.
//
// Threads: a Tape is not thread-safe; use one Tape per thread.  ThreadTapes
// holds one Tape per OpenMP thread for generated parallel regions.
//
// Debugging: define TORCHCLAD_TAPE_DEBUG to record the type of every push and
// check it on pop (throws std::logic_error on a mismatch).  Off by default.
#pragma once

#include <cerrno>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#ifdef TORCHCLAD_TAPE_DEBUG
#include <typeinfo>
#endif

#if defined(__GNUC__) || defined(__clang__)
#define TORCHCLAD_TAPE_INLINE inline __attribute__((always_inline))
#define TORCHCLAD_TAPE_COLD __attribute__((noinline, cold))
#define TORCHCLAD_TAPE_LIKELY(x) __builtin_expect(!!(x), 1)
#else
#define TORCHCLAD_TAPE_INLINE inline
#define TORCHCLAD_TAPE_COLD
#define TORCHCLAD_TAPE_LIKELY(x) (x)
#endif

namespace torchclad {

// Counters describing what a tape did; see Tape::stats().
struct TapeStats {
  std::size_t slab_allocations = 0;     // heap slabs obtained from operator new
  std::size_t resident_bytes = 0;       // heap slab bytes currently in memory
  std::size_t peak_resident_bytes = 0;  // maximum of resident_bytes
  std::size_t slabs_spilled = 0;        // slabs written to a file
  std::size_t slabs_loaded = 0;         // slabs read back from a file
  std::size_t bytes_spilled = 0;
  std::size_t bytes_loaded = 0;
  std::size_t prefetch_waits = 0;  // reverse sweep had to wait for a read
};

namespace detail {

constexpr std::size_t kCell = sizeof(std::uint64_t);

inline constexpr std::size_t cells_for(std::size_t bytes) noexcept {
  return (bytes + kCell - 1) / kCell;
}

template <class V>
TORCHCLAD_TAPE_INLINE std::uint64_t to_cell(const V& v) noexcept {
  static_assert(sizeof(V) <= kCell, "to_cell: value larger than a cell");
  std::uint64_t c = 0;
  std::memcpy(&c, &v, sizeof(V));
  return c;
}

inline std::uint64_t* alloc_cells(std::size_t cells) {
  return static_cast<std::uint64_t*>(::operator new(cells * kCell));
}

inline void free_cells(std::uint64_t* p) noexcept { ::operator delete(p); }

// One heap slab.  Headers stay in memory; `data` is released while the
// contents live in a file.
struct Slab {
  enum class State : unsigned char { kResident, kOnDisk, kLoading };

  Slab* prev = nullptr;
  Slab* next = nullptr;
  std::uint64_t* data = nullptr;
  std::size_t cells = 0;
  std::uint64_t offset = 0;  // position in its segment file while on disk
  std::uint32_t file = 0;    // segment file while on disk / being loaded
  State state = State::kResident;
  bool prefetched = false;  // a background load was issued by the owner
  std::exception_ptr error;  // set by the loader thread on failure
};

// Parses TORCHCLAD_TAPE_MEMORY_LIMIT-style values: "<digits>[K|M|G][i][B]".
inline std::size_t parse_memory_limit(const char* text) {
  if (text == nullptr) return 0;
  const char* s = text;
  while (*s == ' ' || *s == '\t') ++s;
  if (*s == '\0') return 0;
  if (*s < '0' || *s > '9') {
    throw std::invalid_argument(
        std::string("TORCHCLAD_TAPE_MEMORY_LIMIT: expected a number of bytes, got '") +
        text + "'");
  }
  unsigned long long v = 0;
  while (*s >= '0' && *s <= '9') {
    const unsigned d = static_cast<unsigned>(*s - '0');
    if (v > (~0ULL - d) / 10) {
      throw std::invalid_argument(
          std::string("TORCHCLAD_TAPE_MEMORY_LIMIT: value too large: '") + text + "'");
    }
    v = v * 10 + d;
    ++s;
  }
  unsigned shift = 0;
  switch (*s) {
    case 'k': case 'K': shift = 10; ++s; break;
    case 'm': case 'M': shift = 20; ++s; break;
    case 'g': case 'G': shift = 30; ++s; break;
    default: break;
  }
  if (shift != 0 && (*s == 'i' || *s == 'I')) ++s;
  if (*s == 'b' || *s == 'B') ++s;
  while (*s == ' ' || *s == '\t') ++s;
  if (*s != '\0') {
    throw std::invalid_argument(
        std::string("TORCHCLAD_TAPE_MEMORY_LIMIT: cannot parse '") + text + "'");
  }
  if (shift != 0 && v > (~0ULL >> shift)) {
    throw std::invalid_argument(
        std::string("TORCHCLAD_TAPE_MEMORY_LIMIT: value too large: '") + text + "'");
  }
  v <<= shift;
  if (v > static_cast<unsigned long long>(~std::size_t{0})) return ~std::size_t{0};
  return static_cast<std::size_t>(v);
}

// Files backing spilled slabs.  Spilled slabs always form a prefix of the
// slab chain (the oldest ones) and come back newest first, so the files are
// used as a stack: slab after slab in segment files of about 64 slabs each
// ("spill-0", "spill-1", ...) inside a private directory.  A segment file is
// unlinked as soon as the slab at its start has been read back, and the
// directory with whatever is left is removed by the destructor.  Writes are
// synchronous (they go to the page cache); reads are queued to a background
// thread that works through them in the order they were requested.  The
// loader thread touches only its job and the Slab it was handed, never the
// Tape or the file table, so moving a Tape is safe while a load is in flight.
class SpillStore {
 public:
  explicit SpillStore(std::uint64_t segment_bytes) : segment_bytes_(segment_bytes) {
    const char* base = std::getenv("TMPDIR");
    std::string root = (base != nullptr && *base != '\0') ? base : "/tmp";
    std::string templ = root + "/torchclad-tape-XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) {  // creates the directory with mode 0700
      throw std::system_error(errno, std::generic_category(),
                              "torchclad::Tape: cannot create spill directory under " + root);
    }
    dir_.assign(buf.data());
  }

  ~SpillStore() {
    shutdown();
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
    remove_directory();
  }

  SpillStore(const SpillStore&) = delete;
  SpillStore& operator=(const SpillStore&) = delete;

  const std::string& dir() const noexcept { return dir_; }

  // Writes s's cells right after `below` (the highest slab on disk, or null)
  // and records the position in s.  Caller thread.  No load may be in flight
  // for the bytes being overwritten (the owner waits for them first).
  void store(Slab* s, const Slab* below) {
    const std::size_t bytes = s->cells * kCell;
    std::uint32_t file = 0;
    std::uint64_t off = 0;
    if (below != nullptr) {
      file = below->file;
      off = below->offset + below->cells * kCell;
      if (off + bytes > segment_bytes_) {
        ++file;
        off = 0;
      }
    }
    const int fd = open_segment(file);
    const char* src = reinterpret_cast<const char*>(s->data);
    std::size_t done = 0;
    while (done < bytes) {
      const ssize_t w = ::pwrite(fd, src + done, bytes - done, static_cast<off_t>(off + done));
      if (w < 0) {
        if (errno == EINTR) continue;
        fail(errno, "cannot write", path(file));
      }
      done += static_cast<std::size_t>(w);
    }
    s->file = file;
    s->offset = off;
  }

  // Reads a slab back into buf (s->cells cells) on the caller thread.
  void load_now(Slab* s, std::uint64_t* buf) {
    read_at(fds_[s->file], buf, s->cells * kCell, s->offset, s->file);
    s->data = buf;
  }

  // Queues a background read into buf; the caller has set s->state =
  // kLoading.  On success the loader sets s->data = buf; on failure it frees
  // buf and stores the error in s.  Returns false (nothing queued, buf still
  // the caller's) if the loader thread cannot be started or the queue cannot
  // grow; the slab can then be read with load_now().
  bool load_async(Slab* s, std::uint64_t* buf) noexcept {
    try {
      std::lock_guard<std::mutex> lk(mu_);
      if (!worker_.joinable()) worker_ = std::thread([this] { run(); });
      jobs_.push_back(Job{s, buf, fds_[s->file], s->file, s->offset, s->cells});
    } catch (...) {
      return false;
    }
    job_cv_.notify_one();
    return true;
  }

  // Blocks until a slab queued with load_async is in memory; rethrows a read
  // error.  Returns true if it had to wait.
  bool wait(Slab* s) {
    std::unique_lock<std::mutex> lk(mu_);
    bool waited = false;
    while (s->state == Slab::State::kLoading) {
      waited = true;
      done_cv_.wait(lk);
    }
    if (s->error) {
      std::exception_ptr e = s->error;
      s->error = nullptr;
      std::rethrow_exception(e);
    }
    return waited;
  }

  // Called once slab s is back in memory.  If s was the first slab of its
  // segment, nothing in that segment is needed any more: delete the file.
  void loaded(const Slab* s) noexcept {
    if (s->offset != 0) return;
    int& fd = fds_[s->file];
    if (fd >= 0) {
      ::close(fd);
      fd = -1;
      ::unlink(path(s->file).c_str());
    }
  }

  // Stops the loader thread.  Queued, not started loads are dropped (their
  // slabs go back to kOnDisk).  Afterwards no other thread touches any slab.
  void shutdown() noexcept {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
      for (const Job& j : jobs_) {
        j.slab->state = Slab::State::kOnDisk;
        free_cells(j.buf);
      }
      jobs_.clear();
    }
    job_cv_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

 private:
  struct Job {
    Slab* slab;
    std::uint64_t* buf;
    int fd;
    std::uint32_t file;
    std::uint64_t offset;
    std::size_t cells;
  };

  [[noreturn]] static void fail(int err, const char* what, const std::string& p) {
    throw std::system_error(err, std::generic_category(),
                            std::string("torchclad::Tape: ") + what + " " + p);
  }

  std::string path(std::uint32_t file) const {
    return dir_ + "/spill-" + std::to_string(file);
  }

  int open_segment(std::uint32_t file) {
    if (file >= fds_.size()) fds_.resize(file + 1, -1);
    if (fds_[file] < 0) {
      const std::string p = path(file);
      const int fd = ::open(p.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd < 0) fail(errno, "cannot create", p);
      fds_[file] = fd;
    }
    return fds_[file];
  }

  void read_at(int fd, std::uint64_t* dst, std::size_t bytes, std::uint64_t off,
               std::uint32_t file) const {
    char* out = reinterpret_cast<char*>(dst);
    std::size_t done = 0;
    while (done < bytes) {
      const ssize_t r = ::pread(fd, out + done, bytes - done, static_cast<off_t>(off + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        fail(errno, "cannot read", path(file));
      }
      if (r == 0) throw std::runtime_error("torchclad::Tape: spill file truncated: " + path(file));
      done += static_cast<std::size_t>(r);
    }
  }

  void run() noexcept {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      while (!stop_ && jobs_.empty()) job_cv_.wait(lk);
      if (stop_) return;
      const Job job = jobs_.front();
      jobs_.pop_front();
      lk.unlock();
      std::uint64_t* buf = job.buf;
      std::exception_ptr err;
      try {
        read_at(job.fd, buf, job.cells * kCell, job.offset, job.file);
      } catch (...) {
        free_cells(buf);
        buf = nullptr;
        err = std::current_exception();
      }
      lk.lock();
      job.slab->data = buf;
      job.slab->error = err;
      job.slab->state = err ? Slab::State::kOnDisk : Slab::State::kResident;
      done_cv_.notify_all();
    }
  }

  void remove_directory() noexcept {
    if (dir_.empty()) return;
    if (DIR* d = ::opendir(dir_.c_str())) {
      while (const dirent* e = ::readdir(d)) {
        const char* n = e->d_name;
        if (n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0'))) continue;
        ::unlinkat(::dirfd(d), n, 0);
      }
      ::closedir(d);
    }
    ::rmdir(dir_.c_str());
  }

  std::string dir_;
  std::uint64_t segment_bytes_;
  std::vector<int> fds_;  // open segment files (-1: none); owner thread only
  std::mutex mu_;
  std::condition_variable job_cv_;
  std::condition_variable done_cv_;
  std::deque<Job> jobs_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace detail

// The tape.  Move-only (a tape is never duplicated by accident); 64-byte
// aligned so that tapes of different threads (ThreadTapes) do not share a
// cache line.  Pops must mirror pushes exactly: same order reversed, same
// types, same array lengths.  Popping from an empty tape throws
// std::out_of_range.  After an I/O error from the spill files (reported as
// std::system_error by push or pop) the tape may only be cleared or destroyed.
class alignas(64) Tape {
 public:
  static constexpr std::size_t kInlineBytes = 256;
  static constexpr std::size_t kFirstSlabBytes = std::size_t{4} << 10;
  static constexpr std::size_t kMaxSlabBytes = std::size_t{1} << 20;
  static constexpr std::size_t kMinSpillSlabBytes = std::size_t{4} << 10;
  static constexpr unsigned kPrefetchAhead = 2;

  Tape() noexcept : top_(inline_), begin_(inline_), end_(inline_ + kInlineCells) {}

  TORCHCLAD_TAPE_INLINE ~Tape() {
    if (first_ != nullptr || spill_) release();
  }

  Tape(const Tape&) = delete;
  Tape& operator=(const Tape&) = delete;

  Tape(Tape&& other) noexcept : Tape() { steal(other); }

  Tape& operator=(Tape&& other) noexcept {
    if (this != &other) {
      release();
      steal(other);
    }
    return *this;
  }

  // ---- hot path -----------------------------------------------------------

  template <class V>
  TORCHCLAD_TAPE_INLINE void push(const V& v) {
    static_assert(std::is_trivially_copyable<V>::value,
                  "torchclad::Tape stores trivially copyable values only");
    debug_push<V>(1);
    if constexpr (sizeof(V) <= detail::kCell) {
      const std::uint64_t c = detail::to_cell(v);
      if (TORCHCLAD_TAPE_LIKELY(top_ != end_)) {
        *top_ = c;
        ++top_;
      } else {
        push_cell_slow(c);
      }
    } else {
      write_bytes(&v, sizeof(V));
    }
  }

  template <class V>
  TORCHCLAD_TAPE_INLINE V pop() {
    using T = typename std::remove_cv<V>::type;
    static_assert(std::is_trivially_copyable<T>::value,
                  "torchclad::Tape stores trivially copyable values only");
    debug_pop<T>(1);
    T out;
    if constexpr (sizeof(T) <= detail::kCell) {
      std::uint64_t c;
      if (TORCHCLAD_TAPE_LIKELY(top_ != begin_)) {
        --top_;
        c = *top_;
      } else {
        c = pop_cell_slow();
      }
      std::memcpy(&out, &c, sizeof(T));
    } else {
      read_bytes(&out, sizeof(T));
    }
    return out;
  }

  template <class V>
  inline void push_array(const V* p, std::size_t n) {
    static_assert(std::is_trivially_copyable<V>::value,
                  "torchclad::Tape stores trivially copyable values only");
    if (n == 0) return;
    debug_push<V>(n);
    write_bytes(p, n * sizeof(V));
  }

  template <class V>
  inline void pop_array(V* p, std::size_t n) {
    static_assert(std::is_trivially_copyable<V>::value,
                  "torchclad::Tape stores trivially copyable values only");
    if (n == 0) return;
    debug_pop<V>(n);
    read_bytes(p, n * sizeof(V));
  }

  bool empty() const noexcept { return top_ == begin_ && below_cells_ == 0; }

  // Bytes occupied by the stored values (each value padded to 8-byte cells).
  std::size_t size_bytes() const noexcept {
    return (below_cells_ + static_cast<std::size_t>(top_ - begin_)) * detail::kCell;
  }

  // Drops every value.  Keeps one resident heap slab for reuse; removes the
  // spill directory.
  void clear() noexcept {
    detail::Slab* keep = nullptr;
    if (spill_) spill_->shutdown();
    free_stash();
    for (detail::Slab* s = first_; s != nullptr;) {
      detail::Slab* n = s->next;
      if (keep == nullptr && s->data != nullptr) {
        keep = s;
      } else {
        drop_slab(s);
      }
      s = n;
    }
    spill_.reset();
    first_ = keep;
    resident_bytes_ = keep != nullptr ? keep->cells * detail::kCell : 0;
    if (keep != nullptr) {
      keep->prev = keep->next = nullptr;
      keep->state = detail::Slab::State::kResident;
      keep->prefetched = false;
      keep->error = nullptr;
    }
    cur_ = nullptr;
    disk_top_ = nullptr;
    ahead_ = 0;
    below_cells_ = 0;
    begin_ = top_ = inline_;
    end_ = inline_ + kInlineCells;
#ifdef TORCHCLAD_TAPE_DEBUG
    debug_types_.clear();
#endif
  }

  // ---- configuration and introspection (cold) -------------------------------

  // Overrides TORCHCLAD_TAPE_MEMORY_LIMIT for this tape (0 = unlimited).
  // Takes effect at the next slab boundary.
  void set_memory_limit(std::size_t bytes) noexcept {
    limit_ = bytes;
    limit_known_ = true;
  }

  // The limit in force (reads the environment if not known yet).
  std::size_t memory_limit() {
    ensure_limit();
    return limit_;
  }

  static std::size_t memory_limit_from_env() {
    return detail::parse_memory_limit(std::getenv("TORCHCLAD_TAPE_MEMORY_LIMIT"));
  }

  // Directory holding spilled slabs; empty if nothing has been spilled.
  std::string spill_dir() const { return spill_ ? spill_->dir() : std::string(); }

  TapeStats stats() const noexcept {
    TapeStats s = stats_;
    s.resident_bytes = resident_bytes_;
    return s;
  }

 private:
  static constexpr std::size_t kInlineCells = kInlineBytes / detail::kCell;
  using Slab = detail::Slab;

  // ---- bulk copies ----------------------------------------------------------

  void write_bytes(const void* src, std::size_t len) {
    const std::size_t cells = detail::cells_for(len);
    if (TORCHCLAD_TAPE_LIKELY(static_cast<std::size_t>(end_ - top_) >= cells)) {
      top_[cells - 1] = 0;  // zero the padding of the last cell
      std::memcpy(top_, src, len);
      top_ += cells;
    } else {
      write_bytes_slow(static_cast<const unsigned char*>(src), len);
    }
  }

  void read_bytes(void* dst, std::size_t len) {
    const std::size_t cells = detail::cells_for(len);
    if (TORCHCLAD_TAPE_LIKELY(static_cast<std::size_t>(top_ - begin_) >= cells)) {
      top_ -= cells;
      std::memcpy(dst, top_, len);
    } else {
      read_bytes_slow(static_cast<unsigned char*>(dst), len);
    }
  }

  TORCHCLAD_TAPE_COLD void push_cell_slow(std::uint64_t c) {
    advance();
    *top_ = c;
    ++top_;
  }

  TORCHCLAD_TAPE_COLD std::uint64_t pop_cell_slow() {
    retreat();
    --top_;
    return *top_;
  }

  TORCHCLAD_TAPE_COLD void write_bytes_slow(const unsigned char* src, std::size_t len) {
    std::size_t full = len / detail::kCell;
    const std::size_t rem = len % detail::kCell;
    while (full > 0) {
      if (top_ == end_) advance();
      std::size_t k = static_cast<std::size_t>(end_ - top_);
      if (k > full) k = full;
      std::memcpy(top_, src, k * detail::kCell);
      top_ += k;
      src += k * detail::kCell;
      full -= k;
    }
    if (rem != 0) {
      std::uint64_t c = 0;
      std::memcpy(&c, src, rem);
      if (top_ == end_) advance();
      *top_ = c;
      ++top_;
    }
  }

  TORCHCLAD_TAPE_COLD void read_bytes_slow(unsigned char* dst, std::size_t len) {
    std::size_t full = len / detail::kCell;
    const std::size_t rem = len % detail::kCell;
    if (rem != 0) {
      if (top_ == begin_) retreat();
      --top_;
      std::memcpy(dst + full * detail::kCell, top_, rem);
    }
    while (full > 0) {
      if (top_ == begin_) retreat();
      std::size_t k = static_cast<std::size_t>(top_ - begin_);
      if (k > full) k = full;
      top_ -= k;
      full -= k;
      std::memcpy(dst + full * detail::kCell, top_, k * detail::kCell);
    }
  }

  // ---- slab transitions -----------------------------------------------------

  void ensure_limit() {
    if (!limit_known_) {
      limit_ = memory_limit_from_env();
      limit_known_ = true;
    }
  }

  std::size_t slab_cap_bytes() const noexcept {
    if (limit_ == 0) return kMaxSlabBytes;
    // Four slabs per limit, a power of two in [kMinSpillSlabBytes, kMaxSlabBytes].
    std::size_t cap = kMinSpillSlabBytes;
    while (cap < kMaxSlabBytes && cap * 2 <= limit_ / 4) cap *= 2;
    return cap;
  }

  bool over_budget(std::size_t more) const noexcept {
    return limit_ != 0 && resident_bytes_ + more > limit_;
  }

  void note_resident(std::size_t add) noexcept {
    resident_bytes_ += add;
    if (resident_bytes_ > stats_.peak_resident_bytes) stats_.peak_resident_bytes = resident_bytes_;
  }

  // The current segment is full: move to the next one (spare or new slab).
  void advance() {
    const std::size_t full = static_cast<std::size_t>(end_ - begin_);
    Slab* next = cur_ != nullptr ? cur_->next : first_;
    if (next == nullptr) {
      ensure_limit();
      const std::size_t cap = slab_cap_bytes();
      const std::size_t bytes = next_slab_bytes_ < cap ? next_slab_bytes_ : cap;
      const std::size_t cells = bytes / detail::kCell;
      std::unique_ptr<Slab> s(new Slab);
      std::uint64_t* data = (limit_ != 0 || stash_ != nullptr) ? make_room(cells) : nullptr;
      if (data == nullptr) {
        data = detail::alloc_cells(cells);
        ++stats_.slab_allocations;
        note_resident(bytes);
      }
      s->data = data;
      s->cells = cells;
      s->prev = cur_;
      next = s.release();
      if (cur_ != nullptr) {
        cur_->next = next;
      } else {
        first_ = next;
      }
      next_slab_bytes_ = bytes * 2 < cap ? bytes * 2 : cap;
    }
    below_cells_ += full;
    cur_ = next;
    begin_ = top_ = next->data;
    end_ = begin_ + next->cells;
  }

  // The current segment is empty: make the previous one current.
  void retreat() {
    if (cur_ == nullptr) {
      throw std::out_of_range("torchclad::Tape::pop: the tape is empty");
    }
    if (cur_->next != nullptr) {  // keep a single spare: the slab we leave
      drop_slab(cur_->next, /*recycle=*/true);
      cur_->next = nullptr;
    }
    Slab* prev = cur_->prev;
    if (prev != nullptr) {
      if (prev->prefetched) {
        prev->prefetched = false;
        --ahead_;
        if (spill_->wait(prev)) ++stats_.prefetch_waits;
        spill_->loaded(prev);
        ++stats_.slabs_loaded;
        stats_.bytes_loaded += prev->cells * detail::kCell;
      } else if (prev->state == Slab::State::kOnDisk) {
        // Spilled by a push after the last retreat and not prefetched (it is
        // the top of the on-disk prefix; only with a limit of a few slabs):
        // read it on this thread.  On failure nothing has changed.
        std::uint64_t* buf = take_buffer(prev->cells);
        try {
          spill_->load_now(prev, buf);
        } catch (...) {
          give_back(buf, prev->cells);
          throw;
        }
        spill_->loaded(prev);
        prev->state = Slab::State::kResident;
        disk_top_ = prev->prev;
        ++stats_.slabs_loaded;
        stats_.bytes_loaded += prev->cells * detail::kCell;
      }
    }
    cur_ = prev;
    if (prev != nullptr) {
      begin_ = prev->data;
      end_ = top_ = begin_ + prev->cells;
    } else {
      begin_ = inline_;
      end_ = top_ = inline_ + kInlineCells;
    }
    below_cells_ -= static_cast<std::size_t>(end_ - begin_);
    if (prev != nullptr && prev->next != nullptr && over_budget(0)) {
      drop_slab(prev->next, /*recycle=*/true);  // no room for a spare
      prev->next = nullptr;
    }
    if (disk_top_ != nullptr) {
      prefetch();
    } else if (stash_ != nullptr) {
      free_stash();  // nothing left to reload
    }
  }

  // Issues background reads of the on-disk slabs just below the current one.
  void prefetch() {
    while (disk_top_ != nullptr && ahead_ < kPrefetchAhead) {
      Slab* s = disk_top_;
      const std::size_t bytes = s->cells * detail::kCell;
      if (over_budget(stash_cells_ == s->cells ? 0 : bytes)) {
        // Over budget: only the slab needed next is worth evicting the spare.
        if (cur_ == nullptr || s != cur_->prev) break;
        if (cur_->next != nullptr) {
          drop_slab(cur_->next, /*recycle=*/true);
          cur_->next = nullptr;
        }
      }
      std::uint64_t* buf;
      try {
        buf = take_buffer(s->cells);
      } catch (...) {
        return;  // prefetch is best effort; retreat() reads it when reached
      }
      s->state = Slab::State::kLoading;
      if (!spill_->load_async(s, buf)) {
        s->state = Slab::State::kOnDisk;
        give_back(buf, s->cells);
        return;
      }
      disk_top_ = s->prev;
      s->prefetched = true;
      ++ahead_;
    }
  }

  // Spills the oldest resident full slabs until `cells` more fit in the
  // limit.  Returns a released buffer of exactly `cells` cells to reuse, if any.
  std::uint64_t* make_room(std::size_t cells) {
    const std::size_t need = cells * detail::kCell;
    std::uint64_t* reuse = nullptr;  // stays counted as resident
    if (stash_ != nullptr) {
      if (stash_cells_ == cells) {
        reuse = stash_;
        stash_ = nullptr;
        stash_cells_ = 0;
      } else {
        free_stash();
      }
    }
    try {
      while (over_budget(reuse != nullptr ? 0 : need)) {
        Slab* victim = disk_top_ != nullptr ? disk_top_->next : first_;
        // The current slab is never spilled: that keeps every on-disk slab
        // strictly below the current one and the hot pointers valid.
        if (victim == nullptr || victim == cur_) break;
        if (!spill_) spill_.reset(new detail::SpillStore(64 * std::uint64_t{slab_cap_bytes()}));
        if (victim->prefetched) {
          victim->prefetched = false;
          --ahead_;
          spill_->wait(victim);
        }
        spill_->store(victim, disk_top_);
        const std::size_t bytes = victim->cells * detail::kCell;
        ++stats_.slabs_spilled;
        stats_.bytes_spilled += bytes;
        if (reuse == nullptr && victim->cells == cells) {
          reuse = victim->data;
        } else {
          detail::free_cells(victim->data);
          resident_bytes_ -= bytes;
        }
        victim->data = nullptr;
        victim->state = Slab::State::kOnDisk;
        disk_top_ = victim;
      }
    } catch (...) {
      if (reuse != nullptr) {
        detail::free_cells(reuse);
        resident_bytes_ -= need;
      }
      throw;
    }
    return reuse;
  }

  // Frees a slab header and its data.  With recycle, while slabs are on disk,
  // the data buffer is kept for the next reload instead.
  void drop_slab(Slab* s, bool recycle = false) noexcept {
    if (s == nullptr) return;
    if (s->data != nullptr) {
      if (recycle && disk_top_ != nullptr) {
        give_back(s->data, s->cells);
      } else {
        detail::free_cells(s->data);
        resident_bytes_ -= s->cells * detail::kCell;
      }
    }
    delete s;
  }

  // A buffer of `cells` cells for a reload: the recycled one if it fits, else
  // a new one.  Either way it is counted as resident.
  std::uint64_t* take_buffer(std::size_t cells) {
    if (stash_ != nullptr && stash_cells_ == cells) {
      std::uint64_t* b = stash_;
      stash_ = nullptr;
      stash_cells_ = 0;
      return b;
    }
    std::uint64_t* b = detail::alloc_cells(cells);
    ++stats_.slab_allocations;
    note_resident(cells * detail::kCell);
    return b;
  }

  // Keeps one resident buffer for reuse by take_buffer(); frees the rest.
  void give_back(std::uint64_t* b, std::size_t cells) noexcept {
    if (stash_ == nullptr) {
      stash_ = b;
      stash_cells_ = cells;
    } else {
      detail::free_cells(b);
      resident_bytes_ -= cells * detail::kCell;
    }
  }

  void free_stash() noexcept {
    if (stash_ != nullptr) {
      detail::free_cells(stash_);
      resident_bytes_ -= stash_cells_ * detail::kCell;
      stash_ = nullptr;
      stash_cells_ = 0;
    }
  }

  TORCHCLAD_TAPE_COLD void release() noexcept {
    if (spill_) spill_->shutdown();  // joins the loader: slabs are stable now
    free_stash();
    for (Slab* s = first_; s != nullptr;) {
      Slab* n = s->next;
      drop_slab(s);
      s = n;
    }
    spill_.reset();  // removes the directory and any remaining files
    first_ = cur_ = disk_top_ = nullptr;
    ahead_ = 0;
    below_cells_ = 0;
    resident_bytes_ = 0;
    begin_ = top_ = inline_;
    end_ = inline_ + kInlineCells;
#ifdef TORCHCLAD_TAPE_DEBUG
    debug_types_.clear();
#endif
  }

  // Takes over other's contents; other must be empty-constructed or released.
  void steal(Tape& o) noexcept {
    const std::size_t used_inline =
        o.cur_ == nullptr ? static_cast<std::size_t>(o.top_ - o.inline_) : kInlineCells;
    std::memcpy(inline_, o.inline_, used_inline * detail::kCell);
    if (o.cur_ == nullptr) {
      begin_ = inline_;
      top_ = inline_ + used_inline;
      end_ = inline_ + kInlineCells;
    } else {
      begin_ = o.begin_;
      top_ = o.top_;
      end_ = o.end_;
    }
    cur_ = o.cur_;
    first_ = o.first_;
    below_cells_ = o.below_cells_;
    disk_top_ = o.disk_top_;
    resident_bytes_ = o.resident_bytes_;
    limit_ = o.limit_;
    limit_known_ = o.limit_known_;
    next_slab_bytes_ = o.next_slab_bytes_;
    ahead_ = o.ahead_;
    stash_ = o.stash_;
    stash_cells_ = o.stash_cells_;
    o.stash_ = nullptr;
    o.stash_cells_ = 0;
    stats_ = o.stats_;
    spill_ = std::move(o.spill_);
#ifdef TORCHCLAD_TAPE_DEBUG
    debug_types_ = std::move(o.debug_types_);
    o.debug_types_.clear();
#endif
    o.first_ = o.cur_ = o.disk_top_ = nullptr;
    o.below_cells_ = 0;
    o.resident_bytes_ = 0;
    o.ahead_ = 0;
    o.next_slab_bytes_ = kFirstSlabBytes;
    o.stats_ = TapeStats();
    o.begin_ = o.top_ = o.inline_;
    o.end_ = o.inline_ + kInlineCells;
  }

  // ---- optional type checking -----------------------------------------------
#ifdef TORCHCLAD_TAPE_DEBUG
  struct DebugEntry {
    const std::type_info* type;
    std::size_t count;
  };
  std::vector<DebugEntry> debug_types_;

  template <class V>
  void debug_push(std::size_t n) {
    debug_types_.push_back(DebugEntry{&typeid(V), n});
  }
  template <class V>
  void debug_pop(std::size_t n) {
    if (debug_types_.empty()) {
      throw std::out_of_range(std::string("torchclad::Tape: pop<") + typeid(V).name() +
                              "> from an empty tape");
    }
    const DebugEntry e = debug_types_.back();
    if (*e.type != typeid(V) || e.count != n) {
      throw std::logic_error(std::string("torchclad::Tape: pushed ") + e.type->name() + " x" +
                             std::to_string(e.count) + ", popped " + typeid(V).name() + " x" +
                             std::to_string(n));
    }
    debug_types_.pop_back();
  }
#else
  template <class V>
  TORCHCLAD_TAPE_INLINE void debug_push(std::size_t) noexcept {}
  template <class V>
  TORCHCLAD_TAPE_INLINE void debug_pop(std::size_t) noexcept {}
#endif

  // Hot state first (one cache line with the start of the inline buffer).
  std::uint64_t* top_;
  std::uint64_t* begin_;
  std::uint64_t* end_;
  Slab* cur_ = nullptr;    // current heap slab; nullptr = the inline buffer
  Slab* first_ = nullptr;  // first heap slab (its prev is the inline buffer)
  std::size_t below_cells_ = 0;  // cells in the (full) segments below cur_
  // Cold state.
  Slab* disk_top_ = nullptr;  // highest slab whose data is on disk
  std::size_t resident_bytes_ = 0;
  std::size_t limit_ = 0;
  std::size_t next_slab_bytes_ = kFirstSlabBytes;
  std::uint64_t* stash_ = nullptr;  // one recycled buffer for reloads
  std::size_t stash_cells_ = 0;
  unsigned ahead_ = 0;  // prefetched slabs not yet reached
  bool limit_known_ = false;
  TapeStats stats_;
  std::unique_ptr<detail::SpillStore> spill_;
  alignas(16) std::uint64_t inline_[kInlineCells];
};

// One Tape per OpenMP thread, for generated parallel regions:
//
//   torchclad::ThreadTapes tapes;                // sized by omp_get_max_threads()
//   #pragma omp parallel for schedule(static)
//   for (...) { tapes.local().push(x); ... }
//   ...
//   #pragma omp parallel for schedule(static)    // same team size and schedule
//   for (...) { x = tapes.local().pop<double>(); ... }
//
// local() indexes by omp_get_thread_num() (the innermost team; nested regions
// are not supported).  Without OpenMP there is a single tape.
class ThreadTapes {
 public:
  ThreadTapes() : ThreadTapes(default_threads()) {}
  explicit ThreadTapes(std::size_t n) : tapes_(n != 0 ? n : 1) {}

  ThreadTapes(const ThreadTapes&) = delete;
  ThreadTapes& operator=(const ThreadTapes&) = delete;
  ThreadTapes(ThreadTapes&&) noexcept = default;
  ThreadTapes& operator=(ThreadTapes&&) noexcept = default;

  static std::size_t default_threads() noexcept {
#ifdef _OPENMP
    const int n = omp_get_max_threads();
    return n > 0 ? static_cast<std::size_t>(n) : 1;
#else
    return 1;
#endif
  }

  static std::size_t thread_index() noexcept {
#ifdef _OPENMP
    return static_cast<std::size_t>(omp_get_thread_num());
#else
    return 0;
#endif
  }

  Tape& local() {
    const std::size_t i = thread_index();
    if (i >= tapes_.size()) {
      throw std::out_of_range("torchclad::ThreadTapes: thread " + std::to_string(i) +
                              " but only " + std::to_string(tapes_.size()) + " tapes");
    }
    return tapes_[i];
  }

  Tape& operator[](std::size_t i) noexcept { return tapes_[i]; }
  const Tape& operator[](std::size_t i) const noexcept { return tapes_[i]; }
  std::size_t size() const noexcept { return tapes_.size(); }

  bool empty() const noexcept {
    for (const Tape& t : tapes_) {
      if (!t.empty()) return false;
    }
    return true;
  }

  void clear() noexcept {
    for (Tape& t : tapes_) t.clear();
  }

 private:
  std::vector<Tape> tapes_;
};

}  // namespace torchclad
