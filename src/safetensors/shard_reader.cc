#include "fp4forge/safetensors/shard_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "fp4forge/safetensors/map_guard.h"
#include "fp4forge/util/fs.h"

namespace fp4forge::st {

struct ShardReader::Impl {
  std::string path;
  Header header;
  const std::byte* base = nullptr;
  std::uint64_t size = 0;
  void* map = nullptr;  // mmap'd region (MAP_FAILED never stored)
  MapGuard guard;       // SIGBUS on the mapping (the file shrank) is recorded, not fatal
  fs::File file;        // kept open: check_unchanged() fstats the very inode that is mapped
  std::int64_t mtime_ns = 0;
  std::vector<std::byte> buffer;
  std::unordered_map<std::string_view, std::size_t> index;  // views into header.tensors names

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    guard = MapGuard{};
    if (map) fs::ops().munmap(map, static_cast<std::size_t>(size));
  }
  void build_index() {
    index.reserve(header.tensors.size());
    for (std::size_t i = 0; i < header.tensors.size(); ++i) index.emplace(header.tensors[i].name, i);
  }
};

ShardReader::ShardReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ShardReader::ShardReader(ShardReader&&) noexcept = default;
ShardReader& ShardReader::operator=(ShardReader&&) noexcept = default;
ShardReader::~ShardReader() = default;

Result<ShardReader> ShardReader::open(const std::filesystem::path& path) {
  auto impl = std::make_unique<Impl>();
  impl->path = path.string();
  FP4FORGE_ASSIGN_OR_RETURN(fs::File f, fs::File::open_read(path));
  struct stat st {};
  if (fs::ops().fstat(f.fd(), &st) != 0) {
    int e = errno;
    return Error{Errc::IO, fmt::format("cannot stat '{}': {}", impl->path, std::strerror(e)),
                 impl->path,
                 {}};
  }
  if (!S_ISREG(st.st_mode))
    return Error{Errc::BAD_INPUT,
                 fmt::format("'{}' is not a regular file; expected a .safetensors file", impl->path),
                 impl->path,
                 {}};
  impl->size = static_cast<std::uint64_t>(st.st_size);
  impl->mtime_ns = fs::file_stamp(st).mtime_ns;
  if (impl->size > static_cast<std::uint64_t>(SIZE_MAX))
    return Error{Errc::IO, fmt::format("cannot map '{}': {} bytes exceed the address space",
                                       impl->path, impl->size),
                 impl->path,
                 {}};
  if (impl->size > 0) {
    void* m = fs::ops().mmap(nullptr, static_cast<std::size_t>(impl->size), PROT_READ, MAP_PRIVATE,
                             f.fd(), 0);
    if (m == MAP_FAILED) {
      int e = errno;
      return Error{Errc::IO, fmt::format("cannot map '{}': {}", impl->path, std::strerror(e)),
                   impl->path,
                   {}};
    }
    impl->map = m;
    impl->base = static_cast<const std::byte*>(m);
    impl->guard = MapGuard(m, static_cast<std::size_t>(impl->size));
  }
  impl->file = std::move(f);
  FP4FORGE_ASSIGN_OR_RETURN(
      impl->header,
      parse_header(std::span<const std::byte>(impl->base, static_cast<std::size_t>(impl->size)),
                   impl->path));
  impl->build_index();
  return ShardReader(std::move(impl));
}

Result<ShardReader> ShardReader::from_buffer(std::vector<std::byte> bytes, std::string name) {
  auto impl = std::make_unique<Impl>();
  impl->path = std::move(name);
  impl->buffer = std::move(bytes);
  impl->base = impl->buffer.data();
  impl->size = impl->buffer.size();
  FP4FORGE_ASSIGN_OR_RETURN(impl->header, parse_header(impl->buffer, impl->path));
  impl->build_index();
  return ShardReader(std::move(impl));
}

const Header& ShardReader::header() const noexcept { return impl_->header; }
const std::string& ShardReader::path() const noexcept { return impl_->path; }
std::uint64_t ShardReader::file_size() const noexcept { return impl_->size; }

Status ShardReader::check_unchanged() const {
  if (impl_->file.fd() < 0) return {};  // an in-memory buffer
  struct stat st {};
  const bool stat_ok = fs::ops().fstat(impl_->file.fd(), &st) == 0;
  const auto now = stat_ok ? static_cast<std::uint64_t>(st.st_size) : impl_->size;
  if (impl_->guard.faulted() || now != impl_->size)
    return Error{Errc::BAD_INPUT,
                 fmt::format("source file '{}' changed during the run: it was {} bytes and is now {}; nothing "
                             "read from it is used; rerun on a stable source",
                             impl_->path, impl_->size, now),
                 impl_->path,
                 {}};
  const std::int64_t mt = fs::file_stamp(st).mtime_ns;
  if (stat_ok && mt != impl_->mtime_ns)
    return Error{Errc::BAD_INPUT,
                 fmt::format("source file '{}' changed during the run (it was modified after it was opened); "
                             "nothing read from it is used; rerun on a stable source",
                             impl_->path),
                 impl_->path,
                 {}};
  return {};
}

const TensorInfo* ShardReader::find(std::string_view name) const noexcept {
  auto it = impl_->index.find(name);
  return it == impl_->index.end() ? nullptr : &impl_->header.tensors[it->second];
}

std::span<const std::byte> ShardReader::data(const TensorInfo& t) const noexcept {
  FP4FORGE_CHECK(t.begin <= t.end && t.end <= impl_->header.data_size());
  return {impl_->base + impl_->header.data_start() + t.begin, static_cast<std::size_t>(t.nbytes())};
}

namespace {
std::uint64_t page_size() noexcept {
  static const std::uint64_t page = [] {
    long p = ::sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<std::uint64_t>(p) : std::uint64_t{4096};
  }();
  return page;
}
}  // namespace

void ShardReader::prefetch(const TensorInfo& t) const noexcept {
  if (!impl_->map || t.nbytes() == 0) return;
  const std::uint64_t page = page_size();
  const std::uint64_t lo = (impl_->header.data_start() + t.begin) / page * page;
  const std::uint64_t hi = std::min(impl_->header.data_start() + t.begin + t.nbytes(), impl_->size);
  if (hi <= lo) return;
  ::madvise(static_cast<char*>(impl_->map) + lo, static_cast<std::size_t>(hi - lo), MADV_WILLNEED);
}

void ShardReader::release(const TensorInfo& t) const noexcept {
  if (!impl_->map || t.nbytes() == 0) return;
  const std::uint64_t page = page_size();
  // Only whole pages inside the tensor: neighbours sharing a boundary page stay resident.
  const std::uint64_t lo = impl_->header.data_start() + t.begin;
  const std::uint64_t hi = std::min(lo + t.nbytes(), impl_->size);
  const std::uint64_t a = (lo + page - 1) / page * page;
  const std::uint64_t b = hi / page * page;
  if (b <= a) return;
  ::madvise(static_cast<char*>(impl_->map) + a, static_cast<std::size_t>(b - a), MADV_DONTNEED);
}

}  // namespace fp4forge::st
