// A small fixed pool of host threads for data-parallel passes (digests, packing, verification). The calling
// thread takes part, so a pool of n threads uses n cores.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace reprise::core {

class WorkPool {
 public:
  explicit WorkPool(unsigned threads);
  ~WorkPool();
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  /// Calls fn(i) for every i < count, spread over the pool's threads; returns when all are done. The first
  /// exception thrown by fn is rethrown here. Not reentrant: one parallel_for at a time.
  void parallel_for(std::size_t count, const std::function<void(std::size_t)>& fn);
  unsigned threads() const { return static_cast<unsigned>(workers_.size()) + 1; }

 private:
  void worker_loop();
  void drain_items(const std::function<void(std::size_t)>& fn, std::size_t count);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(std::size_t)>* fn_ = nullptr;
  std::size_t count_ = 0;
  std::atomic<std::size_t> next_{0};
  std::size_t generation_ = 0;
  unsigned busy_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::mutex call_mutex_;
};

}  // namespace reprise::core
