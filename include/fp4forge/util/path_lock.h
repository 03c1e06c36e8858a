#pragma once
/**
 * The one edit lock: an exclusive advisory lock (flock(2), through fs::ops()) on a file or folder, held by every
 * read-modify-replace of a user's file (gateway swap / add / retire / rollback on the config, doctor --fix on
 * the checkpoint folder) from its read to its final rename, and by quantize's staging set-up on DST's parent.
 * Two such edits of one file at once run one after the other: the second reads what the first wrote, so
 * neither edit is lost (round 4, R4-B1). Nothing is created and nothing is written: the lock is taken on the
 * file (or folder) itself, opened read-only. A file replaced by a rename while a process waited is opened
 * again, so the lock is always on the file the path names now. The kernel drops the lock when its holder
 * exits, killed or not.
 */
#include <chrono>
#include <filesystem>

#include "fp4forge/core/error.h"

namespace fp4forge::fs {

class PathLock {
 public:
  /** How long an edit waits for another one of the same file by default (a gateway swap's probe included). */
  static constexpr std::chrono::milliseconds kDefaultWait{std::chrono::minutes(5)};
  /** wait = kForever: block until the lock is free. */
  static constexpr std::chrono::milliseconds kForever{-1};

  PathLock() = default;
  PathLock(PathLock&& o) noexcept;
  PathLock& operator=(PathLock&& o) noexcept;
  PathLock(const PathLock&) = delete;
  PathLock& operator=(const PathLock&) = delete;
  ~PathLock() { release(); }

  /** Takes the lock on `path` (a file or a folder; "" = the current folder), waiting up to `wait`. IO when
   * `path` cannot be opened or locked, or when another process still holds it after `wait` (the message names
   * the path and the wait). */
  Status acquire(const std::filesystem::path& path, std::chrono::milliseconds wait = kDefaultWait);
  void release() noexcept;
  bool held() const noexcept { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace fp4forge::fs
