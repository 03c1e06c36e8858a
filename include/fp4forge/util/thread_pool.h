#pragma once
/**
 * A fixed-size thread pool (one persistent set of workers for a whole run) and a byte budget used to
 * bound the memory held by in-flight tasks.
 *
 * - `ThreadPool::submit` never blocks; tasks run in FIFO order on the workers.
 * - `wait_idle()` returns once every submitted task has finished.
 * - Tasks must not throw (a throwing task terminates the process; fp4forge code returns Result): a task whose
 *   body may meet std::bad_alloc runs it through `run_guarded`.
 * - `ByteBudget::acquire(n)` blocks until `n` bytes fit under the limit. A request larger than the
 *   limit is admitted alone (when nothing else is held), so a single oversized task cannot deadlock.
 */
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "fp4forge/core/error.h"

namespace fp4forge {

class ThreadPool {
 public:
  /** The most workers a pool starts (`-j` above it is a usage error in the CLI). */
  static constexpr unsigned kMaxThreads = 1024;
  /** Starts `threads` workers (capped at kMaxThreads); 0 means hardware_concurrency() (at least 1). Never
   * throws: when the system refuses a thread (ulimit, memory), the pool keeps the workers it got, and with
   * none it runs each task inline in submit(). */
  explicit ThreadPool(unsigned threads = 0);
  ~ThreadPool();  ///< waits for queued tasks, then joins the workers
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /** Queues a task. */
  void submit(std::function<void()> task);
  /** Blocks until the queue is empty and no task is running. */
  void wait_idle();
  /** Number of worker threads (1 when tasks run inline). */
  unsigned size() const noexcept { return workers_.empty() ? 1u : static_cast<unsigned>(workers_.size()); }
  /** Tasks queued or running. */
  std::size_t pending() const;

  /** The default worker count: hardware_concurrency(), at least 1. */
  static unsigned default_threads() noexcept;

 private:
  void worker_loop();

  mutable std::mutex mu_;
  std::condition_variable cv_work_;
  std::condition_variable cv_idle_;
  std::deque<std::function<void()>> queue_;
  std::size_t running_ = 0;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

/** Runs fn(0) .. fn(n - 1) as tasks on `pool` and waits for those n (not for the pool's other tasks).
 * Call it from outside the pool's workers (a worker waiting on its own pool can deadlock it). An exception of fn
 * (std::bad_alloc) never reaches a worker: the first is rethrown here after the started tasks finished, and the
 * tasks not yet started are skipped. */
void parallel_for(ThreadPool& pool, std::size_t n, const std::function<void(std::size_t)>& fn);

/** Runs a task's body on a worker: its Status, or, when it throws std::bad_alloc (the one exception fp4forge code
 * lets through, core/error.h), an INTERNAL error (exit 5, "out of memory", as the CLI's main reports one on the
 * main thread) naming `what` and the hint (fewer workers, a lower --max-memory), instead of std::terminate taking
 * the process down with its staging folder (a worker's allocation fails first under `ulimit -v`). */
Status run_guarded(const std::function<Status()>& body, std::string_view what);

/** The error run_guarded returns for an allocation that failed in `what`. Making it allocates: where even that
 * fails, run_guarded lets that std::bad_alloc through, and a pool task that must never throw catches it, flags it
 * without allocating, and has the run's own thread make this error once the workers are idle (quantize's Runner). */
Error out_of_memory_error(std::string_view what);

/** Rows per task when `rows` rows of `cols` elements are split over `workers`: about `elements` elements a
 * task, but no fewer tasks than workers (when there are rows enough), and at least one row. */
std::uint64_t rows_per_task(std::uint64_t rows, std::uint64_t cols, unsigned workers, std::uint64_t elements);

/** A counting budget of bytes shared by the producer (acquire) and the tasks (release). */
class ByteBudget {
 public:
  explicit ByteBudget(std::uint64_t limit) : limit_(limit == 0 ? 1 : limit) {}

  /** Blocks until `n` more bytes fit (or nothing is held, for n > limit). Returns the bytes charged
   * (== n), to be passed to release(). */
  std::uint64_t acquire(std::uint64_t n);
  /** Non-blocking acquire; false if it does not fit now. */
  bool try_acquire(std::uint64_t n);
  void release(std::uint64_t n);
  /** Bytes currently held. */
  std::uint64_t in_use() const;
  /** Highest in_use() seen. */
  std::uint64_t peak() const;
  std::uint64_t limit() const noexcept { return limit_; }

 private:
  bool fits(std::uint64_t n) const noexcept { return used_ == 0 || used_ + n <= limit_; }
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t limit_;
  std::uint64_t used_ = 0;
  std::uint64_t peak_ = 0;
};

}  // namespace fp4forge
