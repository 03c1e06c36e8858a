#pragma once
/**
 * The one per-thread scratch object: one T per thread, made on the thread's first get() and deleted when the
 * thread exits. Used instead of a `thread_local` with a destructor (a std::vector, a std::unique_ptr) on any
 * code a worker thread runs: such a thread_local is registered through glibc's __cxa_thread_atexit_impl, whose
 * calloc failing under `ulimit -v` is an uncatchable __libc_fatal abort (round 4, the thread-cap test). Here
 * every failure is a std::bad_alloc on the calling thread, which run_guarded turns into exit 5 with the staging
 * folder kept. The key is a POSIX thread-specific key: setting it allocates nothing for the first keys of a
 * process, and reports ENOMEM (thrown as bad_alloc) otherwise.
 *
 * Declare it `static` (function scope or namespace scope): the key lives to the process's end on purpose, so
 * the object has no destructor to run at exit and a thread exiting late still finds its key.
 */
#include <pthread.h>

#include <memory>
#include <new>
#include <type_traits>

namespace fp4forge {

template <class T>
class ThreadOwned {
 public:
  ThreadOwned() {
    if (pthread_key_create(&key_, [](void* p) { delete static_cast<T*>(p); }) != 0) throw std::bad_alloc();
  }
  ThreadOwned(const ThreadOwned&) = delete;
  ThreadOwned& operator=(const ThreadOwned&) = delete;

  /** The calling thread's T, value-initialized on its first call. Throws std::bad_alloc only. */
  T& get() {
    if (void* p = pthread_getspecific(key_)) return *static_cast<T*>(p);
    auto fresh = std::make_unique<T>();
    if (pthread_setspecific(key_, fresh.get()) != 0) throw std::bad_alloc();
    return *fresh.release();
  }

 private:
  pthread_key_t key_{};
};

}  // namespace fp4forge
