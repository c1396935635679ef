// The mark of the runtime's own threads (thread_name.hpp).
#include "core/thread_name.hpp"

namespace reprise::core {
namespace {
thread_local bool runtime_thread_mark = false;
}  // namespace

bool runtime_thread() {
  return runtime_thread_mark;
}

void mark_runtime_thread() {
  runtime_thread_mark = true;
}

}  // namespace reprise::core
