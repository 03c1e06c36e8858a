#pragma once
/**
 * The one I/O seam. Every file-system call fp4forge makes for writing (and for reading shards) goes
 * through `fs::ops()`, so tests can inject ENOSPC, EIO, short writes, fsync and rename failures.
 *
 * Rules:
 * - RAII descriptors; EINTR is retried on read/write; destructors never throw and never retry close.
 * - Output files are written as `NAME.partial`, fsynced, then renamed (`AtomicFile`); a failed or
 *   abandoned AtomicFile removes its `.partial`.
 * - Errors are `Errc::IO` with the path and strerror: "cannot write 'x.partial': No space left on device".
 */
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "fp4forge/core/error.h"

namespace fp4forge::fs {

/** The POSIX calls behind the seam. The default forwards to libc; tests subclass and override. */
class Ops {
 public:
  virtual ~Ops() = default;
  virtual int open(const char* path, int flags, mode_t mode);
  virtual ssize_t read(int fd, void* buf, std::size_t n);
  virtual ssize_t pread(int fd, void* buf, std::size_t n, off_t off);
  virtual ssize_t write(int fd, const void* buf, std::size_t n);
  virtual ssize_t pwrite(int fd, const void* buf, std::size_t n, off_t off);
  virtual int fsync(int fd);
  virtual int close(int fd);
  virtual int rename(const char* from, const char* to);
  virtual int unlink(const char* path);
  virtual int mkdir(const char* path, mode_t mode);
  virtual int ftruncate(int fd, off_t len);
  virtual int fstat(int fd, struct stat* st);
  virtual int lstat(const char* path, struct stat* st);
  virtual int stat(const char* path, struct stat* st);
  virtual int fchmod(int fd, mode_t mode);
  virtual int fchown(int fd, uid_t uid, gid_t gid);
  /** mmap/munmap (shard reading); a failing mmap returns MAP_FAILED with errno set. */
  virtual void* mmap(void* addr, std::size_t len, int prot, int flags, int fd, off_t off);
  virtual int munmap(void* addr, std::size_t len);
  virtual int rmdir(const char* path);
  /** flock(2) (the quantize staging and destination locks). */
  virtual int flock(int fd, int op);
  virtual int statvfs(const char* path, struct statvfs* st);
  /** popen/pclose (nvidia-smi for `plan`). */
  virtual std::FILE* popen(const char* command, const char* mode);
  virtual int pclose(std::FILE* f);
};

/** The active Ops (libc by default). */
Ops& ops();
/** Installs `o` (nullptr restores libc) and returns the previous one. Not thread-safe: tests only. */
Ops* set_ops(Ops* o);

/** RAII file descriptor. Move-only. */
class File {
 public:
  File() = default;
  ~File();
  File(File&& o) noexcept;
  File& operator=(File&& o) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  static Result<File> open_read(const std::filesystem::path& p);
  /** Creates a new file for writing (O_EXCL | O_NOFOLLOW: never opens an existing file or follows a
   * link planted at `p`; a stale regular file or link at `p` is removed first). */
  static Result<File> create(const std::filesystem::path& p, mode_t mode = 0644);
  /** Size of the open file (fstat through the seam). */
  Result<std::uint64_t> size() const;
  int fd() const noexcept { return fd_; }
  const std::string& path() const noexcept { return path_; }

  /** Writes all bytes (retries short writes and EINTR). */
  Status write_all(std::span<const std::byte> data);
  Status write_all(std::string_view data) {
    return write_all(std::as_bytes(std::span<const char>(data.data(), data.size())));
  }
  Status pwrite_all(std::span<const std::byte> data, std::uint64_t offset);
  /** Reads exactly data.size() bytes at offset (EIO or EOF is an error). */
  Status pread_all(std::span<std::byte> data, std::uint64_t offset);
  Status fsync();
  /** Starts writeback of [offset, offset + len) without waiting for it (Linux sync_file_range with
   * SYNC_FILE_RANGE_WRITE; nothing elsewhere). A hint: its errors are ignored, the later fsync() reports any. It
   * keeps a long streaming write from piling up dirty pages, which the kernel would otherwise make the writing
   * threads flush (stalling them) and leave to the final fsync. */
  void start_writeback(std::uint64_t offset, std::uint64_t len) noexcept;
  Status close();  ///< explicit close with error report

 private:
  int fd_ = -1;
  std::string path_;
};

/** A file written as `final.partial` then fsynced and renamed to `final` by commit(). */
class AtomicFile {
 public:
  AtomicFile() = default;
  ~AtomicFile();  ///< removes the .partial if not committed
  AtomicFile(AtomicFile&&) noexcept;
  AtomicFile& operator=(AtomicFile&&) noexcept;

  /** `final.partial` (private folders: staging, shard writer), or with `unique` a fresh
   * `final.partial-XXXXXXXX` (files edited in place in a user's folder), created O_EXCL | O_NOFOLLOW. */
  static Result<AtomicFile> create(const std::filesystem::path& final_path, bool unique = false,
                                   mode_t mode = 0644);
  File& file() { return file_; }
  const std::filesystem::path& final_path() const { return final_; }
  std::filesystem::path partial_path() const;
  /** fsync, close, rename .partial -> final, fsync the directory. */
  Status commit();
  /** Removes the .partial (no error if absent). */
  void abort() noexcept;

 private:
  File file_;
  std::filesystem::path final_;
  std::filesystem::path partial_;
  bool done_ = true;
};

/** The write gate. AtomicFile's create and commit and rename_durable pass it shared (a moment each);
 * `close_write_gate()` takes it for good. An interrupt's clean-up (on its watcher thread) closes it first, so the
 * writers, still running, can neither create a file nor rename one to a final name after the clean-up has listed
 * the folder: what it removes is all there is (issue 55 tryout: an interrupted header-only synth went on renaming
 * shards while its clean-up ran, and said "nothing kept" beside 24 of them). Never opened again: the process
 * exits next. */
void close_write_gate() noexcept;

/** True for the names AtomicFile gives its temporaries: `NAME.partial` and `NAME.partial-XXXXXXXX`. Such a file
 * is never output: a kill leaves it behind, and whatever finds one removes or skips it. */
inline bool is_partial_name(std::string_view name) {
  return name.ends_with(".partial") || name.find(".partial-") != std::string_view::npos;
}

/** Writes a new file in a folder fp4forge owns (staging, synth and compose output) atomically:
 * `path.partial` (O_EXCL | O_NOFOLLOW; a stale file or planted link there is removed, never followed),
 * fsync, rename, fsync the folder. Mode 0644. */
Status write_file_atomic(const std::filesystem::path& path, std::string_view content);
/**
 * The one atomic-replace helper for every file fp4forge edits in a user's folder (doctor --fix and its
 * backups, gateway edits and backups): a fresh unique `path.partial-XXXXXXXX` beside `path`
 * (O_EXCL | O_NOFOLLOW, mode 0600 until it carries the final mode), fsync, rename, fsync the folder. An
 * existing `path` keeps its mode and owner (owner where permitted); a new one gets 0666 & ~umask, or with
 * `like` the mode and owner of that file from its first byte (a backup of a config that holds keys is as
 * private as the config). A `path` that is a symbolic link is refused (BAD_INPUT): replacing it would turn
 * the link into a copy, and writing through it could reach outside the folder.
 */
Status edit_file_atomic(const std::filesystem::path& path, std::string_view content);
Status edit_file_atomic(const std::filesystem::path& path, std::string_view content, const std::filesystem::path& like);
/**
 * The one rule for a file the user names for output (`--svg PATH`, `--emit-compose DIR` files): lstat first.
 * Absent or a regular file: written atomically beside it (a regular file keeps its mode). A symbolic link,
 * a directory or a socket: refused (BAD_INPUT), nothing written. A character device or a FIFO (`/dev/stdout`,
 * a pipe the user set up): written into, never renamed over; a FIFO without a reader is an error, not a hang.
 */
Status write_user_file(const std::filesystem::path& path, std::string_view content);
/**
 * Before the work whose result goes to `path` (`verify --against --svg`, `plan --svg`): what write_user_file would
 * refuse, and a folder it could not write into. A symbolic link, directory or socket: BAD_INPUT (write_user_file's
 * message). An absent `path` whose folder does not exist, is not a folder or is not writable: IO, naming the folder.
 * Nothing is created. (The write itself can still fail later, e.g. a full disk: write_user_file says so.)
 */
Status check_user_file(const std::filesystem::path& path);

/** Copies `from` to a new file `to` in a folder fp4forge owns (AtomicFile: `to.partial`, then rename). */
Status copy_file_atomic(const std::filesystem::path& from, const std::filesystem::path& to);

/** What says a file changed: size and modification time (nanoseconds). */
struct FileStamp {
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};
/** The stamp of a stat result. */
FileStamp file_stamp(const struct stat& st);
/** The stamp of a path (stat through the seam, following links); nullopt when it cannot be read. */
std::optional<FileStamp> file_stamp(const std::filesystem::path& path);

/** Bytes an unprivileged writer may still write on the filesystem holding `path` (statvfs: f_bavail x
 * f_frsize), or nullopt when it cannot tell. The one free-space rule of quantize and synth. */
std::optional<std::uint64_t> available_bytes(const std::filesystem::path& path);

/** Reads a whole (small) file; refuses files larger than max_bytes with BAD_INPUT. */
Result<std::string> read_file(const std::filesystem::path& path, std::uint64_t max_bytes = 256u << 20);
/** rename() through the seam, then fsync of the target directory. */
Status rename_durable(const std::filesystem::path& from, const std::filesystem::path& to);
/** fsync a directory (so renames inside it are durable). */
Status fsync_dir(const std::filesystem::path& dir);
/** Removes a file, a link (never its target) or a folder tree, through the seam; absent is ok. */
Status remove_tree(const std::filesystem::path& path);
/** mkdir -p through the seam; an existing folder is ok, an existing non-folder is IO (ENOTDIR). */
Status make_directories(const std::filesystem::path& path, mode_t mode = 0755);

}  // namespace fp4forge::fs
