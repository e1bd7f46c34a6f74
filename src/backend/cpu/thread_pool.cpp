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

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  // The calling thread is thread 0; workers are 1..n-1.
  for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::run_parts(Job& job, int thread_index) {
  for (;;) {
    const int i = job.next.fetch_add(1, std::memory_order_relaxed);
    if (i >= job.parts) return;
    const int64_t begin = job.n * i / job.parts, end = job.n * (i + 1) / job.parts;
    (*job.fn)(begin, end, thread_index);
    if (job.finished.fetch_add(1, std::memory_order_acq_rel) + 1 == job.parts) {
      std::lock_guard<std::mutex> lock(mu_);  // the caller checks `finished` under mu_ before it sleeps
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  const int64_t most = std::max<int64_t>(1, n / std::max<int64_t>(grain, 1));
  if (n_threads_ == 1 || most == 1) {
    fn(0, n, 0);
    return;
  }
  Job job;
  job.fn = &fn;
  job.n = n;
  // A part a thread, as when parts were assigned: more parts cost the idle case (each
  // taken with atomics another core also writes) and gained nothing under load
  // (PERFORMANCE.md, session 48).
  job.parts = static_cast<int>(std::min<int64_t>(most, n_threads_));
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_.store(&job, std::memory_order_seq_cst);
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_cv_.notify_all();
  run_parts(job, 0);
  const auto all_done = [&] { return job.finished.load(std::memory_order_acquire) == job.parts; };
  if (!spin_wait(all_done)) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, all_done);
  }
  // No worker may start on the job once it returns: a worker counts itself in
  // `looking_` before it reads job_, and the caller reads `looking_` after clearing
  // job_ (both sequentially consistent), so one of the two sees the other.
  job_.store(nullptr, std::memory_order_seq_cst);
  while (looking_.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    const auto moved = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    if (!spin_wait(moved)) {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, moved);
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    looking_.fetch_add(1, std::memory_order_seq_cst);
    if (Job* job = job_.load(std::memory_order_seq_cst)) run_parts(*job, index);
    looking_.fetch_sub(1, std::memory_order_seq_cst);
  }
}

}  // namespace zinc::cpu
