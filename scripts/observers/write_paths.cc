// How fast can T threads write B bytes of encoded output into one shard file, and where does their time go?
// A device microbenchmark for docs/performance.md (issue 25): the workers of `quantize` write their encoded rows
// with pwrite into one file per output shard, and a task trace showed 21-47 thread-seconds inside pwrite for the
// 6 GB of an 8b. Modes (each writes B bytes in chunks of C from T threads, chunks taken in arrival order):
//   pwrite1  one file, pwrite at each chunk's offset, writeback started per chunk (sync_file_range), as quantize
//   pwriteN  one file per thread, otherwise the same (no file shared between threads)
//   trunc1   one file sized with ftruncate first (sparse), then as pwrite1
//   falloc1  one file sized with fallocate first, then as pwrite1
//   mmap1    one file sized with fallocate, mapped shared, each chunk copied in with memcpy
//   nowb     as pwrite1 with no writeback started (the dirty pages wait for the kernel's flusher and the fsync)
//   wbthread as pwrite1, the writeback started by one more thread, from a queue the writers fill
// then fsync (and for mmap1 msync). Prints wall seconds of the writes and of the sync, the threads' seconds inside
// pwrite (or memcpy) and inside sync_file_range, and the process's user and system CPU seconds.
// Build: g++ -O2 -std=c++20 -static -pthread write_paths.cc -o write_paths
// Run:   write_paths DIR MODE THREADS TOTAL_MB CHUNK_MB
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
double cpu(const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; }
[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(1);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s DIR MODE THREADS TOTAL_MB CHUNK_MB\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1], mode = argv[2];
  const int threads = std::atoi(argv[3]);
  const std::uint64_t total = std::strtoull(argv[4], nullptr, 10) << 20, chunk = std::strtoull(argv[5], nullptr, 10) << 20;
  const std::uint64_t chunks = total / chunk;
  const bool per_thread = mode == "pwriteN", mapped = mode == "mmap1", falloc = mode == "falloc1" || mapped;
  const bool no_wb = mode == "nowb", wb_thread = mode == "wbthread";
  std::vector<int> fds;
  for (int f = 0; f < (per_thread ? threads : 1); ++f) {
    const std::string path = dir + "/out" + std::to_string(f) + ".bin";
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) die("open");
    fds.push_back(fd);
  }
  char* map = nullptr;
  if (mode == "trunc1" && ::ftruncate(fds[0], static_cast<off_t>(total)) != 0) die("ftruncate");
  if (falloc && ::fallocate(fds[0], 0, 0, static_cast<off_t>(total)) != 0) die("fallocate");
  if (mapped) {
    void* p = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
    if (p == MAP_FAILED) die("mmap");
    map = static_cast<char*>(p);
  }
  std::atomic<std::uint64_t> next{0};
  std::atomic<std::uint64_t> in_write_ns{0}, in_wb_ns{0};
  const auto ns_since = [](std::chrono::steady_clock::time_point a) {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - a).count());
  };
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::uint64_t> wb_queue;  // offsets of written chunks (wbthread)
  bool writers_done = false;
  std::thread wb;
  if (wb_thread)
    wb = std::thread([&] {
      for (;;) {
        std::unique_lock lk(mu);
        cv.wait(lk, [&] { return !wb_queue.empty() || writers_done; });
        if (wb_queue.empty()) return;
        const std::uint64_t off = wb_queue.front();
        wb_queue.pop_front();
        lk.unlock();
        const auto a = std::chrono::steady_clock::now();
        (void)::sync_file_range(fds[0], static_cast<off_t>(off), static_cast<off_t>(chunk), SYNC_FILE_RANGE_WRITE);
        in_wb_ns += ns_since(a);
      }
    });
  const double t0 = now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      std::vector<char> buf(chunk);
      std::uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(t + 1);
      for (std::uint64_t i = 0; i < chunk; i += 8) {  // not zeros: no shortcut anywhere
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        std::memcpy(buf.data() + i, &x, 8);
      }
      std::uint64_t mine = 0;
      for (std::uint64_t c; (c = next.fetch_add(1)) < chunks;) {
        const int fd = fds[per_thread ? static_cast<std::size_t>(t) : 0];
        const std::uint64_t off = per_thread ? mine * chunk : c * chunk;
        const auto a = std::chrono::steady_clock::now();
        if (mapped) {
          std::memcpy(map + off, buf.data(), chunk);
        } else {
          for (std::uint64_t done = 0; done < chunk;) {
            const ssize_t n = ::pwrite(fd, buf.data() + done, chunk - done, static_cast<off_t>(off + done));
            if (n <= 0) die("pwrite");
            done += static_cast<std::uint64_t>(n);
          }
        }
        in_write_ns += ns_since(a);
        if (wb_thread) {
          std::lock_guard lk(mu);
          wb_queue.push_back(off);
          cv.notify_one();
        } else if (!no_wb) {
          const auto b = std::chrono::steady_clock::now();
          (void)::sync_file_range(fd, static_cast<off_t>(off), static_cast<off_t>(chunk), SYNC_FILE_RANGE_WRITE);
          in_wb_ns += ns_since(b);
        }
        ++mine;
      }
    });
  for (auto& th : pool) th.join();
  const double t1 = now();
  if (wb_thread) {
    {
      std::lock_guard lk(mu);
      writers_done = true;
    }
    cv.notify_one();
    wb.join();
  }
  if (mapped && ::msync(map, total, MS_SYNC) != 0) die("msync");
  for (int fd : fds)
    if (::fsync(fd) != 0) die("fsync");
  const double t2 = now();
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  std::printf("%s threads=%d MB=%llu chunk_MB=%llu write_s=%.2f sync_s=%.2f total_s=%.2f in_write_thread_s=%.1f in_wb_thread_s=%.1f user_s=%.1f sys_s=%.1f\n",
              mode.c_str(), threads, static_cast<unsigned long long>(total >> 20), static_cast<unsigned long long>(chunk >> 20),
              t1 - t0, t2 - t1, t2 - t0, static_cast<double>(in_write_ns.load()) * 1e-9, static_cast<double>(in_wb_ns.load()) * 1e-9, cpu(ru.ru_utime), cpu(ru.ru_stime));
  for (int f = 0; f < static_cast<int>(fds.size()); ++f) {
    ::close(fds[static_cast<std::size_t>(f)]);
    ::unlink((dir + "/out" + std::to_string(f) + ".bin").c_str());
  }
  return 0;
}
