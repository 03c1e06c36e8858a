// util/thread_pool.h: parallel_for never lets an exception of its body reach a worker (std::terminate would take
// the process and its staging folder down, the HostileLimits case under `ulimit -v`): the first is rethrown on
// the calling thread after the started tasks finished, and the rest are skipped.
#include <atomic>
#include <new>
#include <stdexcept>

#include <gtest/gtest.h>

#include "fp4forge/util/thread_pool.h"

namespace fp4forge {
namespace {

TEST(ThreadPoolParallelFor, RunsEveryIndexOnce) {
  for (unsigned threads : {1u, 3u, 8u}) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> hits(1000);
    parallel_for(pool, hits.size(), [&](std::size_t i) { hits[i].fetch_add(1); });
    for (const auto& h : hits) EXPECT_EQ(h.load(), 1);
    parallel_for(pool, 0, [&](std::size_t) { FAIL() << "no index"; });
  }
}

TEST(ThreadPoolParallelFor, ABodysExceptionIsRethrownOnTheCallerAndTheRestSkipped) {
  for (unsigned threads : {1u, 2u, 8u}) {
    SCOPED_TRACE(threads);
    ThreadPool pool(threads);
    std::atomic<int> ran{0};
    EXPECT_THROW(parallel_for(pool, 10000,
                              [&](std::size_t i) {
                                ran.fetch_add(1);
                                if (i == 3) throw std::bad_alloc();
                              }),
                 std::bad_alloc);
    EXPECT_LT(ran.load(), 10000);  // what was queued after the failure did not run
    // One worker runs the indices in order, so 0..3 ran; several may start index 3 before 0..2, which are then
    // skipped as not yet started (the flake seen under load: ran < 4 is the documented behaviour there).
    EXPECT_GE(ran.load(), threads == 1 ? 4 : 1);
    // The pool is whole afterwards: the next loop runs every index.
    std::atomic<int> after{0};
    parallel_for(pool, 64, [&](std::size_t) { after.fetch_add(1); });
    EXPECT_EQ(after.load(), 64);
  }
}

TEST(ThreadPoolParallelFor, RunGuardedTurnsTheRethrownBadAllocIntoExit5) {
  ThreadPool pool(4);
  const Status st = run_guarded(
      [&]() -> Status {
        parallel_for(pool, 100, [](std::size_t i) {
          if (i % 7 == 6) throw std::bad_alloc();
        });
        return {};
      },
      "verify");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, Errc::INTERNAL);
  EXPECT_NE(st.error().message.find("out of memory in verify"), std::string::npos) << st.error().message;
}

TEST(ThreadPoolParallelFor, AnotherExceptionTypeIsRethrownAsItIs) {
  ThreadPool pool(3);
  EXPECT_THROW(parallel_for(pool, 50, [](std::size_t i) {
                 if (i == 49) throw std::runtime_error("x");
               }),
               std::runtime_error);
}

}  // namespace
}  // namespace fp4forge
