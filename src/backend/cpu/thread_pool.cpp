#include "backend/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace zinc::cpu {
namespace {

// Polls until done() or about 50 us have passed; true if done() came true. Between
// polls it yields the core, so a pool with more threads than cores (or beside other
// busy processes) does not take the time the working threads need.
template <class Done>
bool spin_wait(const Done& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
  for (int i = 1;; ++i) {
    if (done()) return true;
    std::this_thread::yield();
    if (i % 16 == 0 && std::chrono::steady_clock::now() > deadline) return false;
  }
}

void run_part(const std::function<void(int64_t, int64_t, int)>& fn, int64_t n, int parts, int i) {
  int64_t begin = n * i / parts, end = n * (i + 1) / parts;
  if (begin < end) fn(begin, end, i);
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  // The calling thread runs part 0; workers run parts 1..n-1.
  for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_cv_.notify_all();
  for (auto& t : threads_) t.join();
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
    pending_.store(n_threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_cv_.notify_all();
  run_part(fn, n, parts, 0);
  const auto all_done = [this] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!spin_wait(all_done)) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, all_done);
  }
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    const auto moved = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    if (!spin_wait(moved)) {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, moved);
    }
    // The acquire load that saw generation_ move makes stop_ and job_* visible; none
    // of them changes again before this worker counts itself done below.
    seen = generation_.load(std::memory_order_relaxed);
    if (stop_) return;
    if (index < job_parts_) run_part(*job_, job_n_, job_parts_, index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);  // the caller checks pending_ under mu_ before it sleeps
      done_cv_.notify_one();
    }
  }
}

}  // namespace zinc::cpu
