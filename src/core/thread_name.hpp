// Names the calling thread, so that top -H, ps -L, gdb and perf show what each of the runtime's threads is.
#pragma once

#if defined(__linux__)
#include <pthread.h>
#endif

namespace reprise::core {

/// `name`: at most 15 characters (Linux's limit), e.g. "reprise-drain".
inline void name_this_thread(const char* name) {
#if defined(__linux__)
  pthread_setname_np(pthread_self(), name);
#else
  (void)name;
#endif
}

}  // namespace reprise::core
