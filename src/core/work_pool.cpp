#include "core/work_pool.hpp"

#include "core/thread_name.hpp"

namespace reprise::core {

WorkPool::WorkPool(unsigned threads) {
  for (unsigned t = 1; t < (threads ? threads : 1); ++t)
    workers_.push_back(named_thread("reprise-pool", [this] { worker_loop(); }));
}

WorkPool::~WorkPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void WorkPool::drain_items(const std::function<void(std::size_t)>& fn, std::size_t count) {
  for (;;) {
    const std::size_t i = next_.fetch_add(1);
    if (i >= count) return;
    try {
      fn(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
      next_.store(count);  // stop handing out work
    }
  }
}

void WorkPool::worker_loop() {
  std::size_t seen = 0;
  const std::function<void(std::size_t)>* fn = nullptr;
  std::size_t count = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      // The call may be over already (its caller did every item before this thread woke): then fn_ is null.
      // Otherwise the job is read here, under the lock, and the call cannot return before busy_ is back to 0.
      if (!fn_) continue;
      fn = fn_;
      count = count_;
      ++busy_;
    }
    drain_items(*fn, count);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --busy_;
    }
    done_.notify_all();
  }
}

void WorkPool::parallel_for(std::size_t count, const std::function<void(std::size_t)>& fn) {
  if (count == 0) return;
  std::lock_guard<std::mutex> call(call_mutex_);
  if (workers_.empty() || count == 1) {
    for (std::size_t i = 0; i < count; ++i) fn(i);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    count_ = count;
    next_.store(0);
    error_ = nullptr;
    ++generation_;
  }
  wake_.notify_all();
  drain_items(fn, count);
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return busy_ == 0; });
    error = error_;
    fn_ = nullptr;
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace reprise::core
