#include "fp4forge/util/fs.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <random>
#include <shared_mutex>
#include <utility>
#include <vector>

namespace fp4forge::fs {

namespace {
std::shared_mutex& write_gate() {
  static std::shared_mutex gate;
  return gate;
}
}  // namespace

void close_write_gate() noexcept {
  try {
    write_gate().lock();  // held until the process exits
  } catch (...) {  // lock() throws only on a deadlock (this thread holds it): nothing passes the gate either way
  }
}


// ---- Ops: plain libc --------------------------------------------------------------------------

int Ops::open(const char* path, int flags, mode_t mode) { return ::open(path, flags, mode); }
ssize_t Ops::read(int fd, void* buf, std::size_t n) { return ::read(fd, buf, n); }
ssize_t Ops::pread(int fd, void* buf, std::size_t n, off_t off) { return ::pread(fd, buf, n, off); }
ssize_t Ops::write(int fd, const void* buf, std::size_t n) { return ::write(fd, buf, n); }
ssize_t Ops::pwrite(int fd, const void* buf, std::size_t n, off_t off) {
  return ::pwrite(fd, buf, n, off);
}
int Ops::fsync(int fd) { return ::fsync(fd); }
int Ops::close(int fd) { return ::close(fd); }
int Ops::rename(const char* from, const char* to) { return ::rename(from, to); }
int Ops::unlink(const char* path) { return ::unlink(path); }
int Ops::mkdir(const char* path, mode_t mode) { return ::mkdir(path, mode); }
int Ops::ftruncate(int fd, off_t len) { return ::ftruncate(fd, len); }
int Ops::fstat(int fd, struct stat* st) { return ::fstat(fd, st); }
int Ops::lstat(const char* path, struct stat* st) { return ::lstat(path, st); }
int Ops::stat(const char* path, struct stat* st) { return ::stat(path, st); }
int Ops::fchmod(int fd, mode_t mode) { return ::fchmod(fd, mode); }
int Ops::fchown(int fd, uid_t uid, gid_t gid) { return ::fchown(fd, uid, gid); }
void* Ops::mmap(void* addr, std::size_t len, int prot, int flags, int fd, off_t off) {
  return ::mmap(addr, len, prot, flags, fd, off);
}
int Ops::munmap(void* addr, std::size_t len) { return ::munmap(addr, len); }
int Ops::rmdir(const char* path) { return ::rmdir(path); }
int Ops::flock(int fd, int op) { return ::flock(fd, op); }
int Ops::statvfs(const char* path, struct statvfs* st) { return ::statvfs(path, st); }
std::FILE* Ops::popen(const char* command, const char* mode) { return ::popen(command, mode); }
int Ops::pclose(std::FILE* f) { return ::pclose(f); }

namespace {
Ops g_libc_ops;
Ops* g_ops = &g_libc_ops;

std::string errno_text(int e) {
  char buf[256];
  // GNU strerror_r returns the message pointer (which may or may not be buf).
  const char* s = ::strerror_r(e, buf, sizeof buf);
  return s ? std::string(s) : std::string("errno ") + std::to_string(e);
}

Error io_error(const std::string& what, const std::string& path, int e) {
  Error err{Errc::IO, fmt::format("cannot {} '{}': {}", what, path, errno_text(e)), path, {}};
  return err;
}

// Largest single read/write request (Linux caps transfers at 0x7ffff000 anyway).
constexpr std::size_t kMaxChunk = std::size_t{1} << 30;

std::filesystem::path dir_of(const std::filesystem::path& p) {
  auto d = p.parent_path();
  return d.empty() ? std::filesystem::path(".") : d;
}
}  // namespace

Ops& ops() { return *g_ops; }

Ops* set_ops(Ops* o) {
  Ops* prev = g_ops;
  g_ops = o ? o : &g_libc_ops;
  return prev == &g_libc_ops ? nullptr : prev;
}

// ---- File ------------------------------------------------------------------------------------

File::~File() {
  // Never retry close on EINTR: on Linux the descriptor is released either way.
  if (fd_ >= 0) ops().close(fd_);
}

File::File(File&& o) noexcept : fd_(std::exchange(o.fd_, -1)), path_(std::move(o.path_)) {}

File& File::operator=(File&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ops().close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    path_ = std::move(o.path_);
  }
  return *this;
}

Result<File> File::open_read(const std::filesystem::path& p) {
  File f;
  f.path_ = p.string();
  int fd;
  do {
    // O_NONBLOCK: a FIFO given as a file must not hang the open; it is refused below.
    fd = ops().open(f.path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK, 0);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return io_error("open", f.path_, errno);
  f.fd_ = fd;
  struct stat st {};
  // FIFOs, sockets and devices never end or block: refused (a directory fails its callers' own checks).
  if (ops().fstat(fd, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
    return Error{Errc::BAD_INPUT,
                 fmt::format("'{}' is not a regular file ({}); expected a file", f.path_,
                             S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket" : "a device"),
                 f.path_,
                 {}};
  return f;
}

Result<File> File::create(const std::filesystem::path& p, mode_t mode) {
  File f;
  f.path_ = p.string();
  int fd = -1;
  for (int attempt = 0; attempt < 3; ++attempt) {
    do {
      fd = ops().open(f.path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    } while (fd < 0 && errno == EINTR);
    if (fd >= 0 || errno != EEXIST) break;
    // A stale file or a planted link: remove the name (unlink never follows a link) and create anew.
    struct stat st {};
    if (ops().lstat(f.path_.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      errno = EISDIR;
      break;
    }
    if (ops().unlink(f.path_.c_str()) != 0 && errno != ENOENT) break;
    errno = EEXIST;
  }
  if (fd < 0) return io_error("create", f.path_, errno);
  f.fd_ = fd;
  return f;
}

Result<std::uint64_t> File::size() const {
  if (fd_ < 0) return make_error(Errc::INTERNAL, "cannot stat '{}': file is not open", path_);
  struct stat st {};
  if (ops().fstat(fd_, &st) != 0) return io_error("stat", path_, errno);
  if (st.st_size < 0) return make_error(Errc::IO, "cannot stat '{}': negative size", path_);
  return static_cast<std::uint64_t>(st.st_size);
}

Status File::write_all(std::span<const std::byte> data) {
  if (fd_ < 0) return make_error(Errc::INTERNAL, "cannot write '{}': file is not open", path_);
  std::size_t done = 0;
  while (done < data.size()) {
    std::size_t want = std::min(data.size() - done, kMaxChunk);
    ssize_t n = ops().write(fd_, data.data() + done, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error("write", path_, errno);
    }
    if (n == 0) return io_error("write", path_, EIO);  // no progress: never spin
    done += static_cast<std::size_t>(n);
  }
  return {};
}

Status File::pwrite_all(std::span<const std::byte> data, std::uint64_t offset) {
  if (fd_ < 0) return make_error(Errc::INTERNAL, "cannot write '{}': file is not open", path_);
  constexpr auto kMaxOff = static_cast<std::uint64_t>(std::numeric_limits<off_t>::max());
  if (offset > kMaxOff || data.size() > kMaxOff - offset)
    return make_error(Errc::INTERNAL, "cannot write '{}': offset {} + {} bytes exceeds off_t", path_,
                      offset, data.size());
  std::size_t done = 0;
  while (done < data.size()) {
    std::size_t want = std::min(data.size() - done, kMaxChunk);
    ssize_t n = ops().pwrite(fd_, data.data() + done, want, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error("write", path_, errno);
    }
    if (n == 0) return io_error("write", path_, EIO);
    done += static_cast<std::size_t>(n);
  }
  return {};
}

Status File::pread_all(std::span<std::byte> data, std::uint64_t offset) {
  if (fd_ < 0) return make_error(Errc::INTERNAL, "cannot read '{}': file is not open", path_);
  constexpr auto kMaxOff = static_cast<std::uint64_t>(std::numeric_limits<off_t>::max());
  if (offset > kMaxOff || data.size() > kMaxOff - offset)
    return make_error(Errc::IO, "cannot read '{}': offset {} + {} bytes exceeds off_t", path_, offset,
                      data.size());
  std::size_t done = 0;
  while (done < data.size()) {
    std::size_t want = std::min(data.size() - done, kMaxChunk);
    ssize_t n = ops().pread(fd_, data.data() + done, want, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error("read", path_, errno);
    }
    if (n == 0)
      return Error{Errc::IO,
                   fmt::format("cannot read '{}': unexpected end of file at offset {} ({} of {} bytes "
                               "read); file truncated?",
                               path_, offset + done, done, data.size()),
                   path_,
                   {}};
    done += static_cast<std::size_t>(n);
  }
  return {};
}

Status File::fsync() {
  if (fd_ < 0) return make_error(Errc::INTERNAL, "cannot fsync '{}': file is not open", path_);
  int r;
  do {
    r = ops().fsync(fd_);
  } while (r != 0 && errno == EINTR);
  if (r != 0) return io_error("fsync", path_, errno);
  return {};
}

void File::start_writeback(std::uint64_t offset, std::uint64_t len) noexcept {
#ifdef __linux__
  if (fd_ >= 0 && len > 0 && offset <= static_cast<std::uint64_t>(std::numeric_limits<off_t>::max()) &&
      len <= static_cast<std::uint64_t>(std::numeric_limits<off_t>::max()))
    (void)::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(len), SYNC_FILE_RANGE_WRITE);
#else
  (void)offset, (void)len;
#endif
}

Status File::close() {
  if (fd_ < 0) return {};
  int fd = std::exchange(fd_, -1);
  // Do not retry on EINTR (the descriptor is gone); an interrupted close is not a data error.
  if (ops().close(fd) != 0 && errno != EINTR) return io_error("close", path_, errno);
  return {};
}

// ---- AtomicFile ------------------------------------------------------------------------------

AtomicFile::~AtomicFile() { abort(); }

AtomicFile::AtomicFile(AtomicFile&& o) noexcept
    : file_(std::move(o.file_)),
      final_(std::move(o.final_)),
      partial_(std::move(o.partial_)),
      done_(std::exchange(o.done_, true)) {}

AtomicFile& AtomicFile::operator=(AtomicFile&& o) noexcept {
  if (this != &o) {
    abort();
    file_ = std::move(o.file_);
    final_ = std::move(o.final_);
    partial_ = std::move(o.partial_);
    done_ = std::exchange(o.done_, true);
  }
  return *this;
}

std::filesystem::path AtomicFile::partial_path() const { return partial_; }

Result<AtomicFile> AtomicFile::create(const std::filesystem::path& final_path, bool unique, mode_t mode) {
  AtomicFile a;
  a.final_ = final_path;
  a.partial_ = final_path;
  a.partial_ += ".partial";
  if (unique) {
    static constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    std::random_device rd;
    std::string sfx = "-";
    for (int i = 0; i < 8; ++i) sfx += kAlnum[rd() % 36];
    a.partial_ += sfx;
  }
  {
    std::shared_lock gate(write_gate());
    FP4FORGE_ASSIGN_OR_RETURN(a.file_, File::create(a.partial_, mode));
  }
  a.done_ = false;
  return a;
}

Status AtomicFile::commit() {
  if (done_)
    return make_error(Errc::INTERNAL, "cannot commit '{}': already committed or aborted",
                      final_.string());
  auto fail = [this](Error e) {
    abort();
    return e;
  };
  if (auto s = file_.fsync(); !s) return fail(std::move(s).error());
  if (auto s = file_.close(); !s) return fail(std::move(s).error());
  const std::string from = partial_path().string();
  const std::string to = final_.string();
  std::shared_lock gate(write_gate());
  if (ops().rename(from.c_str(), to.c_str()) != 0) {
    int e = errno;
    Error err{Errc::IO, fmt::format("cannot rename '{}' to '{}': {}", from, to, errno_text(e)), to,
              {}};
    return fail(std::move(err));
  }
  done_ = true;  // the final file exists now; nothing to clean up
  return fsync_dir(dir_of(final_));
}

void AtomicFile::abort() noexcept {
  if (done_) return;
  done_ = true;
  // Nothing here may allocate: abort runs from the destructor while a std::bad_alloc unwinds (ulimit -v), where
  // a second throw is std::terminate. Moving in an empty File closes the descriptor; the path's own string is read.
  file_ = File{};
  ops().unlink(partial_.c_str());
}

// ---- helpers ---------------------------------------------------------------------------------

namespace {
/** edit_file_atomic with the mode and owner of `mode_src` (an lstat of the file being replaced or of the
 * file a new one is made like), or 0666 & ~umask when null. */
Status write_atomic_as(const std::filesystem::path& path, std::string_view content, const struct stat* mode_src) {
  const std::string p = path.string();
  struct stat st {};
  const bool exists = ops().lstat(p.c_str(), &st) == 0;
  if (exists && S_ISLNK(st.st_mode)) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(path, ec);
    return Error{Errc::BAD_INPUT,
                 fmt::format("refusing to replace '{}': it is a symbolic link (to '{}'); replacing it would turn "
                             "the link into a copy and writing through it could reach outside the folder; hint: "
                             "edit the link's target, or replace the link with a regular file first",
                             p, ec ? std::string("?") : target.string()),
                 p,
                 {}};
  }
  if (exists && !S_ISREG(st.st_mode))
    return Error{Errc::BAD_INPUT, fmt::format("refusing to replace '{}': it is not a regular file", p), p, {}};
  if (mode_src == nullptr && exists) mode_src = &st;
  FP4FORGE_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::create(path, /*unique=*/true, 0600));
  mode_t mode = 0;
  if (mode_src != nullptr) {
    mode = mode_src->st_mode & 07777;
    (void)ops().fchown(f.file().fd(), mode_src->st_uid, mode_src->st_gid);  // where permitted (root)
  } else {
    const mode_t um = ::umask(0);
    ::umask(um);
    mode = 0666 & ~um;
  }
  if (ops().fchmod(f.file().fd(), mode) != 0) return io_error("chmod", f.partial_path().string(), errno);
  FP4FORGE_TRY(f.file().write_all(content));
  return f.commit();
}
}  // namespace

Status write_file_atomic(const std::filesystem::path& path, std::string_view content) {
  FP4FORGE_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::create(path));
  FP4FORGE_TRY(f.file().write_all(content));
  return f.commit();
}

Status edit_file_atomic(const std::filesystem::path& path, std::string_view content) {
  return write_atomic_as(path, content, nullptr);
}

namespace {
// What write_user_file and check_user_file say of a path they will not write through.
Error refuse_user_file(const std::string& p, mode_t mode) {
  return make_error(Errc::BAD_INPUT, "refusing to write '{}': it is {}; name a regular file (or a new path)", p,
                    S_ISLNK(mode) ? "a symbolic link" : S_ISDIR(mode) ? "a directory" : "a socket or other special file");
}
}  // namespace

Status write_user_file(const std::filesystem::path& path, std::string_view content) {
  const std::string p = path.string();
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) {
    if (errno != ENOENT) return io_error("stat", p, errno);
    return write_file_atomic(path, content);
  }
  if (S_ISREG(st.st_mode)) return write_atomic_as(path, content, nullptr);
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
    // Named on purpose: write into it (O_NONBLOCK so that a FIFO without a reader fails at once).
    const int fd = ::open(p.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC | (S_ISFIFO(st.st_mode) ? O_NONBLOCK : 0));
    if (fd < 0)
      return make_error(errno == ENXIO ? Errc::BAD_INPUT : Errc::IO, "cannot write '{}': {}{}", p,
                        std::strerror(errno), errno == ENXIO ? " (a FIFO with no reader)" : "");
    if (S_ISFIFO(st.st_mode)) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    std::size_t done = 0;
    while (done < content.size()) {
      const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int e = errno;
        ::close(fd);
        return io_error("write", p, e);
      }
      done += static_cast<std::size_t>(n);
    }
    ::close(fd);
    return {};
  }
  return refuse_user_file(p, st.st_mode);
}

Status check_user_file(const std::filesystem::path& path) {
  const std::string p = path.string();
  struct stat st {};
  if (::lstat(p.c_str(), &st) == 0) {
    if (S_ISREG(st.st_mode) || S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return {};
    return refuse_user_file(p, st.st_mode);
  }
  if (errno != ENOENT) return io_error("stat", p, errno);
  const std::filesystem::path parent = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
  const std::string d = parent.string();
  // The error names its file in `file` too (--json's error.file; issue 55 tryout: null beside the message).
  auto with_file = [&](Error e) {
    e.file = p;
    return e;
  };
  if (::stat(d.c_str(), &st) != 0)
    return with_file(make_error(Errc::IO,
                                "cannot write '{}': its folder '{}' {}; hint: create the folder or name another "
                                "path",
                                p, d, errno == ENOENT ? "does not exist" : errno_text(errno)));
  if (!S_ISDIR(st.st_mode))
    return with_file(
        make_error(Errc::IO, "cannot write '{}': '{}' is not a folder; hint: name a path in a folder", p, d));
  if (::access(d.c_str(), W_OK | X_OK) != 0)
    return with_file(make_error(Errc::IO,
                                "cannot write '{}': folder '{}': {}; hint: name a path in a folder you can "
                                "write",
                                p, d, errno_text(errno)));
  return {};
}

Status edit_file_atomic(const std::filesystem::path& path, std::string_view content,
                        const std::filesystem::path& like) {
  struct stat st {};
  const std::string l = like.string();
  if (ops().stat(l.c_str(), &st) != 0) return io_error("stat", l, errno);
  return write_atomic_as(path, content, &st);
}

Result<std::string> read_file(const std::filesystem::path& path, std::uint64_t max_bytes) {
  FP4FORGE_ASSIGN_OR_RETURN(File f, File::open_read(path));
  FP4FORGE_ASSIGN_OR_RETURN(std::uint64_t size, f.size());
  const std::string p = path.string();
  auto too_big = [&](std::uint64_t n) {
    return Error{Errc::BAD_INPUT,
                 fmt::format("cannot read '{}': file is {}{} bytes, over the {}-byte limit for this "
                             "kind of file; wrong file?",
                             p, n > size ? "at least " : "", n, max_bytes),
                 p,
                 {}};
  };
  if (size > max_bytes) return too_big(size);
  std::string out;
  out.resize(static_cast<std::size_t>(size));
  std::size_t done = 0;
  // Read until EOF (the size is only a hint: the file may be a pipe-like or growing file).
  for (;;) {
    if (done == out.size()) {
      if (out.size() >= max_bytes) {
        // Probe for one more byte to tell "exactly max" from "more than max".
        char extra;
        ssize_t n = ops().read(f.fd(), &extra, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return io_error("read", p, errno);
        if (n == 0) break;
        return too_big(out.size() + 1);
      }
      out.resize(std::min<std::uint64_t>(max_bytes, std::max<std::uint64_t>(out.size() * 2, 4096)));
    }
    ssize_t n = ops().read(f.fd(), out.data() + done, std::min(out.size() - done, kMaxChunk));
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error("read", p, errno);
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  out.resize(done);
  FP4FORGE_TRY(f.close());
  return out;
}

Status rename_durable(const std::filesystem::path& from, const std::filesystem::path& to) {
  const std::string a = from.string(), b = to.string();
  std::shared_lock gate(write_gate());
  if (ops().rename(a.c_str(), b.c_str()) != 0) {
    int e = errno;
    return Error{Errc::IO, fmt::format("cannot rename '{}' to '{}': {}", a, b, errno_text(e)), b, {}};
  }
  return fsync_dir(dir_of(to));
}

Status fsync_dir(const std::filesystem::path& dir) {
  const std::string d = dir.empty() ? std::string(".") : dir.string();
  int fd;
  do {
    fd = ops().open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return io_error("open directory", d, errno);
  int r;
  do {
    r = ops().fsync(fd);
  } while (r != 0 && errno == EINTR);
  int e = errno;
  ops().close(fd);
  // Some file systems do not support fsync on directories; that is not a failure of ours.
  if (r != 0 && e != EINVAL && e != ENOTSUP) return io_error("fsync directory", d, e);
  return {};
}

}  // namespace fp4forge::fs

namespace fp4forge::fs {

Status remove_tree(const std::filesystem::path& path) {
  const std::string p = path.string();
  struct stat st {};
  if (ops().lstat(p.c_str(), &st) != 0) {
    if (errno == ENOENT) return {};
    return io_error("stat", p, errno);
  }
  if (S_ISDIR(st.st_mode)) {
    std::error_code ec;
    std::vector<std::filesystem::path> children;
    for (std::filesystem::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec))
      children.push_back(it->path());
    if (ec) return Error{Errc::IO, fmt::format("cannot list '{}': {}", p, ec.message()), p, {}};
    for (const auto& c : children) FP4FORGE_TRY(remove_tree(c));  // never follows links: lstat above
    if (ops().rmdir(p.c_str()) != 0 && errno != ENOENT) return io_error("remove directory", p, errno);
    return {};
  }
  if (ops().unlink(p.c_str()) != 0 && errno != ENOENT) return io_error("remove", p, errno);
  return {};
}

Status make_directories(const std::filesystem::path& path, mode_t mode) {
  if (path.empty()) return {};
  std::filesystem::path cur;
  for (const auto& part : path) {
    cur /= part;
    const std::string c = cur.string();
    if (ops().mkdir(c.c_str(), mode) == 0) continue;
    const int e = errno;
    struct stat st {};
    if (e == EEXIST && ops().stat(c.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
    return io_error("create directory", c, e == EEXIST ? ENOTDIR : e);
  }
  return {};
}

Status copy_file_atomic(const std::filesystem::path& from, const std::filesystem::path& to) {
  FP4FORGE_ASSIGN_OR_RETURN(File in, File::open_read(from));
  FP4FORGE_ASSIGN_OR_RETURN(std::uint64_t size, in.size());
  FP4FORGE_ASSIGN_OR_RETURN(AtomicFile out, AtomicFile::create(to));
  std::vector<std::byte> buf(static_cast<std::size_t>(std::min<std::uint64_t>(size, 8u << 20)));
  for (std::uint64_t off = 0; off < size;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), size - off));
    FP4FORGE_TRY(in.pread_all(std::span<std::byte>(buf.data(), n), off));
    FP4FORGE_TRY(out.file().write_all(std::span<const std::byte>(buf.data(), n)));
    off += n;
  }
  return out.commit();
}

FileStamp file_stamp(const struct stat& st) {
  return FileStamp{static_cast<std::uint64_t>(st.st_size),
                   static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

std::optional<std::uint64_t> available_bytes(const std::filesystem::path& path) {
  struct statvfs st {};
  if (ops().statvfs(path.c_str(), &st) != 0) return std::nullopt;
  return static_cast<std::uint64_t>(st.f_bavail) * static_cast<std::uint64_t>(st.f_frsize);
}

std::optional<FileStamp> file_stamp(const std::filesystem::path& path) {
  struct stat st{};
  if (ops().stat(path.c_str(), &st) != 0) return std::nullopt;
  return file_stamp(st);
}

}  // namespace fp4forge::fs
