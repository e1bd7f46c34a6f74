// A fixed pool of worker threads for data-parallel loops. parallel_for splits
// [0, n) into contiguous ranges, one per worker, and returns when all are done.
//
// A decode step runs a few hundred short loops (one per matmul, norm, attention), each
// tens of microseconds. Waking a sleeping thread costs about as much, so a worker
// polls for a while after each loop before it sleeps, and so does the caller while it
// waits for the workers (spin_wait), yielding the core between polls.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace zinc::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // fn(begin, end, thread_index) over a partition of [0, n). Ranges are at least
  // `grain` long so tiny loops stay on one thread.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  void worker(int index);

  int n_threads_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  // Written under mu_ before generation_ moves; read by workers once they see it move.
  const std::function<void(int64_t, int64_t, int)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int job_parts_ = 0;
  std::atomic<uint64_t> generation_ = 0;  // moves under mu_, so a sleeper cannot miss it
  std::atomic<int> pending_ = 0;          // workers still running the current loop
  bool stop_ = false;
};

}  // namespace zinc::cpu
