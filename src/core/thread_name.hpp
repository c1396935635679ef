// Starts named threads, so that top -H, ps -L, gdb and perf show what each of the runtime's threads is, and marks
// them as the runtime's.
#pragma once

#include <thread>
#include <utility>

#if defined(__linux__)
#include <pthread.h>
#endif

namespace reprise::core {

/// True on a thread started by named_thread: one of the runtime's own (the interposition serves only the program's
/// thread, and tells the program's other threads from these).
bool runtime_thread();
void mark_runtime_thread();

/// Starts `fn` on a new thread, marked as the runtime's, and names it before returning, so the name is there as soon
/// as the thread exists (a thread that named itself might not have run yet). `name`: at most 15 characters (Linux's
/// limit), e.g. "reprise-drain".
template <class Fn>
std::thread named_thread(const char* name, Fn&& fn) {
  std::thread t([body = std::forward<Fn>(fn)]() mutable {
    mark_runtime_thread();
    body();
  });
#if defined(__linux__)
  pthread_setname_np(t.native_handle(), name);
#else
  (void)name;
#endif
  return t;
}

}  // namespace reprise::core
