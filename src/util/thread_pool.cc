#include "fp4forge/util/thread_pool.h"

#include <algorithm>
#include <exception>
#include <new>
#include <utility>

namespace fp4forge {

unsigned ThreadPool::default_threads() noexcept {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

ThreadPool::ThreadPool(unsigned threads) {
  if (threads == 0) threads = default_threads();
  threads = std::min(threads, kMaxThreads);
  try {
    workers_.reserve(threads);
    for (unsigned i = 0; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
  } catch (const std::exception&) {
    // std::system_error (EAGAIN: ulimit -u / -v) or bad_alloc: keep the workers started so far.
  }
}

ThreadPool::~ThreadPool() {
  {
    std::unique_lock lk(mu_);
    cv_idle_.wait(lk, [this] { return queue_.empty() && running_ == 0; });
    stop_ = true;
  }
  cv_work_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::submit(std::function<void()> task) {
  if (workers_.empty()) {  // no thread could be started: run inline
    task();
    return;
  }
  {
    std::lock_guard lk(mu_);
    queue_.push_back(std::move(task));
  }
  cv_work_.notify_one();
}

Error out_of_memory_error(std::string_view what) {
  return make_error(Errc::INTERNAL, "out of memory in {} (an allocation on a worker thread failed); expected the "
                                    "memory its workers need; hint: fewer workers (-j), a lower --max-memory, or a "
                                    "higher ulimit -v", what);
}

Status run_guarded(const std::function<Status()>& body, std::string_view what) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
  }
  return out_of_memory_error(what);  // out of the handler: the failed task's memory and its exception are freed
}

void ThreadPool::wait_idle() {
  std::unique_lock lk(mu_);
  cv_idle_.wait(lk, [this] { return queue_.empty() && running_ == 0; });
}

std::size_t ThreadPool::pending() const {
  std::lock_guard lk(mu_);
  return queue_.size() + running_;
}

void ThreadPool::worker_loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lk(mu_);
      cv_work_.wait(lk, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      task = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    task();
    {
      std::lock_guard lk(mu_);
      --running_;
      if (queue_.empty() && running_ == 0) cv_idle_.notify_all();
    }
  }
}

std::uint64_t ByteBudget::acquire(std::uint64_t n) {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return fits(n); });
  used_ += n;
  peak_ = std::max(peak_, used_);
  return n;
}

bool ByteBudget::try_acquire(std::uint64_t n) {
  std::lock_guard lk(mu_);
  if (!fits(n)) return false;
  used_ += n;
  peak_ = std::max(peak_, used_);
  return true;
}

void ByteBudget::release(std::uint64_t n) {
  {
    std::lock_guard lk(mu_);
    used_ = n > used_ ? 0 : used_ - n;
  }
  cv_.notify_all();
}

std::uint64_t ByteBudget::in_use() const {
  std::lock_guard lk(mu_);
  return used_;
}

std::uint64_t ByteBudget::peak() const {
  std::lock_guard lk(mu_);
  return peak_;
}

std::uint64_t rows_per_task(std::uint64_t rows, std::uint64_t cols, unsigned workers, std::uint64_t elements) {
  const std::uint64_t w = std::max(workers, 1u);
  return std::max<std::uint64_t>(
      1, std::min<std::uint64_t>((rows + w - 1) / w, elements / std::max<std::uint64_t>(cols, 1)));
}

void parallel_for(ThreadPool& pool, std::size_t n, const std::function<void(std::size_t)>& fn) {
  // An exception of fn (std::bad_alloc under `ulimit -v`: the one fp4forge lets through) must not reach a worker's
  // loop (std::terminate, the staging folder left behind): the first is kept, the tasks not yet started are
  // skipped, and it is rethrown here once every submitted task has finished, on the calling thread, where
  // run_guarded or the CLI's main turns it into exit 5. A submit that throws (the queue's allocation) is the same.
  std::mutex mu;
  std::condition_variable cv;
  std::size_t pending = 0;  // submitted and not finished
  std::exception_ptr first;
  try {
    for (std::size_t i = 0; i < n; ++i) {
      {
        std::lock_guard lk(mu);
        if (first) break;
        ++pending;
      }
      try {
        pool.submit([&, i] {
          bool skip = false;
          {
            std::lock_guard lk(mu);
            skip = first != nullptr;
          }
          std::exception_ptr e;
          if (!skip) {
            try {
              fn(i);
            } catch (...) {
              e = std::current_exception();
            }
          }
          std::lock_guard lk(mu);
          if (e && !first) first = e;
          if (--pending == 0) cv.notify_all();
        });
      } catch (...) {
        std::lock_guard lk(mu);
        --pending;
        throw;
      }
    }
  } catch (...) {
    std::lock_guard lk(mu);
    if (!first) first = std::current_exception();
  }
  std::unique_lock lk(mu);
  cv.wait(lk, [&] { return pending == 0; });
  if (first) std::rethrow_exception(first);
}
}  // namespace fp4forge
