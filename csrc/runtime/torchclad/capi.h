// torchclad runtime: the C entry points of a JIT-compiled user kernel.
//
// A user kernel is compiled as plain C++ (no Python, pybind11 or torch headers) into one shared
// library per scalar type. Every function the bridge calls is an `extern "C"` entry point of one
// uniform signature (torchclad/toolchain/capi.py writes them):
//
//   int torchclad_<binding>(const torchclad_arg* args, void* tape, torchclad_arg* ret);
//
// `args` holds the C++ function's arguments in order: pointers in `.p`, integer and bool scalars
// in `.i`, floating scalars in `.d` (converted to the parameter's type by the entry point).
// `tape` is a torchclad::Tape made by torchclad_tape_new (split mode) or null. A non-void
// result goes to `ret` (`.d` for a floating result, `.i` otherwise). The return value is 0 on
// success, 1 when the C++ code threw (the message: torchclad_last_error()), 2 when a debug build
// caught a memory fault or a sanitizer trap (details: torchclad_last_fault()).
//
// One signature for every kernel means a caller holding only the addresses (the prebuilt
// extension torchclad._C_dispatch, or ctypes) can call any of them without generated glue.
//
// Debug builds (TORCHCLAD_GUARDED): the call runs under handlers of SIGSEGV, SIGBUS, SIGILL and
// SIGFPE installed for its duration; a fault in the calling thread jumps back to the entry point
// (siglongjmp), which records the faulting address, whether it was a write, and the instruction
// (its library and offset, for addr2line) and returns 2 instead of letting the process die. The
// bridge allocates every array of a debug call between inaccessible guard pages, so an
// out-of-bounds access faults and the address names the array. A fault in another thread goes
// to the handler that was installed before. Objects the interrupted code owned (a combined-mode
// tape) are leaked, never freed twice.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>

#include "tape.h"

extern "C" {
typedef union torchclad_arg {
  void* p;
  long long i;
  double d;
} torchclad_arg;

typedef struct torchclad_fault {
  int signal;          // SIGSEGV, SIGBUS, SIGILL, SIGFPE; 0 = none
  int write;           // 1 if the faulting access was a write (x86-64 page faults), else 0
  void* address;       // the faulting address (si_addr)
  void* pc;            // the faulting instruction
  const char* object;  // the shared object that holds pc (dladdr), or null
  std::size_t offset;  // pc's offset in that object
} torchclad_fault;
}

#define TORCHCLAD_EXPORT extern "C" __attribute__((visibility("default")))

#ifdef TORCHCLAD_GUARDED
#include <csetjmp>
#include <csignal>
#include <dlfcn.h>
#include <mutex>
#include <ucontext.h>
#endif

namespace torchclad {
namespace capi {

inline thread_local char last_error[1024];
inline thread_local torchclad_fault last_fault;

inline void set_error(const char* what) {
  std::snprintf(last_error, sizeof last_error, "%s", what ? what : "unknown C++ exception");
}

#ifdef TORCHCLAD_GUARDED
constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
constexpr int kNumSignals = sizeof kSignals / sizeof kSignals[0];

inline thread_local sigjmp_buf* jump_target = nullptr;
inline std::mutex handlers_mutex;
inline int handlers_users = 0;
inline struct sigaction previous[kNumSignals];

inline int signal_slot(int sig) {
  for (int k = 0; k < kNumSignals; ++k)
    if (kSignals[k] == sig) return k;
  return -1;
}

inline void on_fault(int sig, siginfo_t* info, void* context) {
  sigjmp_buf* target = jump_target;
  if (target == nullptr) {  // not a guarded call of this thread: whoever handled it before
    const int k = signal_slot(sig);
    const struct sigaction& old = previous[k];
    if (old.sa_flags & SA_SIGINFO) {
      if (old.sa_sigaction) return old.sa_sigaction(sig, info, context);
    } else if (old.sa_handler != SIG_IGN && old.sa_handler != SIG_DFL) {
      return old.sa_handler(sig);
    }
    signal(sig, SIG_DFL);  // the default action happens when the instruction faults again
    return;
  }
  jump_target = nullptr;
  torchclad_fault& f = last_fault;
  f.signal = sig;
  f.address = info->si_addr;
  f.write = 0;
  f.pc = nullptr;
#if defined(__x86_64__) && defined(REG_ERR)
  const auto* uc = static_cast<const ucontext_t*>(context);
  f.write = (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
  f.pc = reinterpret_cast<void*>(uc->uc_mcontext.gregs[REG_RIP]);
#endif
  f.object = nullptr;
  f.offset = 0;
  siglongjmp(*target, 1);
}

// Installs the handlers while at least one guarded call runs (in any thread).
class Handlers {
 public:
  Handlers() {
    std::lock_guard<std::mutex> lock(handlers_mutex);
    if (handlers_users++ == 0) {
      struct sigaction sa;
      std::memset(&sa, 0, sizeof sa);
      sa.sa_sigaction = on_fault;
      sa.sa_flags = SA_SIGINFO | SA_NODEFER;
      sigemptyset(&sa.sa_mask);
      for (int k = 0; k < kNumSignals; ++k) sigaction(kSignals[k], &sa, &previous[k]);
    }
  }
  ~Handlers() {
    std::lock_guard<std::mutex> lock(handlers_mutex);
    if (--handlers_users == 0)
      for (int k = 0; k < kNumSignals; ++k) sigaction(kSignals[k], &previous[k], nullptr);
  }
  Handlers(const Handlers&) = delete;
  Handlers& operator=(const Handlers&) = delete;
};

inline void locate_fault() {
  torchclad_fault& f = last_fault;
  Dl_info where;
  if (f.pc != nullptr && dladdr(f.pc, &where) && where.dli_fname) {
    f.object = where.dli_fname;
    f.offset = static_cast<std::size_t>(static_cast<char*>(f.pc) -
                                        static_cast<char*>(where.dli_fbase));
  }
}
#endif

// Runs body() and turns what it throws (and, in a debug build, a fault) into a status.
template <class Body>
inline int call(Body&& body) noexcept {
  last_error[0] = '\0';
#ifdef TORCHCLAD_GUARDED
  Handlers handlers;
  sigjmp_buf env;
  std::memset(&last_fault, 0, sizeof last_fault);
  if (sigsetjmp(env, 1) != 0) {
    locate_fault();
    return 2;
  }
  jump_target = &env;
#endif
  int status = 0;
  try {
    body();
  } catch (const std::exception& e) {
    set_error(e.what());
    status = 1;
  } catch (...) {
    set_error(nullptr);
    status = 1;
  }
#ifdef TORCHCLAD_GUARDED
  jump_target = nullptr;
#endif
  return status;
}

}  // namespace capi
}  // namespace torchclad

// What every kernel library exports besides its entry points: plain definitions, in the one
// translation unit of a library that does not define TORCHCLAD_CAPI_NO_HELPERS (a JIT kernel
// has one unit; the prebuilt CPU-specific libraries of the built-in kernels define them in their
// module file).
#ifndef TORCHCLAD_CAPI_NO_HELPERS
TORCHCLAD_EXPORT const char* torchclad_last_error() { return torchclad::capi::last_error; }
TORCHCLAD_EXPORT const torchclad_fault* torchclad_last_fault() {
  return &torchclad::capi::last_fault;
}
TORCHCLAD_EXPORT void* torchclad_tape_new() {
  return new (std::nothrow) torchclad::Tape();
}
TORCHCLAD_EXPORT void torchclad_tape_free(void* tape) {
  delete static_cast<torchclad::Tape*>(tape);
}
TORCHCLAD_EXPORT std::size_t torchclad_tape_bytes(void* tape) {
  return static_cast<torchclad::Tape*>(tape)->size_bytes();
}
TORCHCLAD_EXPORT int torchclad_tape_empty(void* tape) {
  return static_cast<torchclad::Tape*>(tape)->empty() ? 1 : 0;
}
#endif  // TORCHCLAD_CAPI_NO_HELPERS
