// The one edit lock (include/fp4forge/util/path_lock.h).
#include "fp4forge/util/path_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "fp4forge/util/fs.h"

namespace fp4forge::fs {

PathLock::PathLock(PathLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}

PathLock& PathLock::operator=(PathLock&& o) noexcept {
  if (this != &o) {
    release();
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

void PathLock::release() noexcept {
  if (fd_ < 0) return;
  ops().flock(fd_, LOCK_UN);
  ops().close(fd_);
  fd_ = -1;
}

Status PathLock::acquire(const std::filesystem::path& path, std::chrono::milliseconds wait) {
  release();
  const std::string p = path.empty() ? std::string(".") : path.string();
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    int fd;
    do fd = ops().open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK, 0);  // O_NONBLOCK: a FIFO never blocks the open
    while (fd < 0 && errno == EINTR);
    if (fd < 0) return make_error(Errc::IO, "cannot open '{}' to lock it: {}", p, std::strerror(errno));
    int r;
    int e = 0;
    if (wait.count() < 0) {
      do r = ops().flock(fd, LOCK_EX);
      while (r != 0 && errno == EINTR);
      e = r != 0 ? errno : 0;
    } else {
      for (;;) {
        r = ops().flock(fd, LOCK_EX | LOCK_NB);
        e = r != 0 ? errno : 0;
        if (r == 0 || (e != EWOULDBLOCK && e != EINTR) || std::chrono::steady_clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    if (r != 0) {
      ops().close(fd);
      if (e == EWOULDBLOCK)
        return make_error(Errc::IO,
                          "cannot lock '{}': another fp4forge edit of it still runs after {} s; expected it to "
                          "finish; hint: wait for the other gateway edit or doctor --fix (or end it), then re-run",
                          p, std::chrono::duration_cast<std::chrono::seconds>(wait).count());
      return make_error(Errc::IO, "cannot lock '{}': {}", p, std::strerror(e));
    }
    // The holder before us may have renamed a new file over the path: lock that one instead.
    struct stat held {}, now {};
    if (ops().fstat(fd, &held) == 0 && ops().stat(p.c_str(), &now) == 0 &&
        (held.st_dev != now.st_dev || held.st_ino != now.st_ino)) {
      ops().flock(fd, LOCK_UN);
      ops().close(fd);
      continue;
    }
    fd_ = fd;
    return {};
  }
}

}  // namespace fp4forge::fs
