// A fixed pool of worker threads for data-parallel loops. parallel_for cuts [0, n)
// into contiguous parts, one per thread, which the caller and the workers take until
// none is left, and returns when all are done.
//
// A decode step runs a few hundred short loops (one per matmul, norm, attention), each
// tens of microseconds. Waking a sleeping thread costs about as much, so a worker
// polls for a while after each loop before it sleeps, and so does the caller while it
// waits (spin_wait), yielding the core between polls. Parts are taken, not assigned: a
// worker the OS has not run yet (more threads than free cores, a busy machine) holds
// up nothing, since the threads that do run take its part. When each worker had its
// own part, the caller waited for every one to be scheduled, and decode on a busy
// 2-core machine fell to 2-4 tokens/s (PERFORMANCE.md, session 48).
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
  // fn(begin, end, thread_index) over a partition of [0, n); a thread may run several
  // parts. Parts are at least `grain` long so tiny loops stay on one thread.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  struct Job {
    const std::function<void(int64_t, int64_t, int)>* fn;
    int64_t n;
    int parts;
    std::atomic<int> next{0};      // the next part to take
    std::atomic<int> finished{0};  // parts done
  };
  void worker(int index);
  void run_parts(Job& job, int thread_index);

  int n_threads_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  std::atomic<Job*> job_ = nullptr;       // the caller's, while its loop runs
  std::atomic<int> looking_ = 0;          // workers that may hold job_
  std::atomic<uint64_t> generation_ = 0;  // moves under mu_ at each loop, so a sleeper cannot miss it
  std::atomic<bool> stop_ = false;
};

}  // namespace zinc::cpu
