#include "backend/cpu/thread_pool.h"

#include <algorithm>

namespace zinc::cpu {

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  // The calling thread runs part 0; workers run parts 1..n-1.
  for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

static void run_part(const std::function<void(int64_t, int64_t, int)>& fn, int64_t n, int parts, int i) {
  int64_t begin = n * i / parts, end = n * (i + 1) / parts;
  if (begin < end) fn(begin, end, i);
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  int parts = static_cast<int>(std::min<int64_t>(n_threads_, std::max<int64_t>(1, n / std::max<int64_t>(grain, 1))));
  if (parts <= 1) {
    fn(0, n, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    job_parts_ = parts;
    pending_ = n_threads_ - 1;
    ++generation_;
  }
  start_cv_.notify_all();
  run_part(fn, n, parts, 0);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t, int)>* job;
    int64_t n;
    int parts;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
      parts = job_parts_;
    }
    if (index < parts) run_part(*job, n, parts, index);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

}  // namespace zinc::cpu
