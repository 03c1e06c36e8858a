#include "fp4forge/safetensors/shard_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <tuple>

#include <nlohmann/json.hpp>

#include "strict_json.h"

namespace fp4forge::st {
namespace {

/** Writes of at least this many bytes start their writeback at once (File::start_writeback). */
constexpr std::size_t kWritebackBytes = std::size_t{1} << 20;

// JSON string literal exactly as serde_json writes it (UTF-8 kept, controls escaped).
Result<std::string> json_quote(const std::string& s, std::string_view what) {
  try {
    return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
  } catch (const nlohmann::json::exception&) {
    return make_error(Errc::BAD_INPUT, "{} '{}' is not valid UTF-8; safetensors names must be UTF-8",
                      what, detail::printable(s));
  }
}

bool write_order_less(DType da, std::string_view na, DType db, std::string_view nb) {
  const int ra = dtype_write_rank(da), rb = dtype_write_rank(db);
  if (ra != rb) return ra < rb;
  return na < nb;  // std::string_view compares bytewise (char_traits<char> is unsigned compare)
}

}  // namespace

const TensorInfo* ShardLayout::find(std::string_view name) const noexcept {
  // tensors are sorted by (write rank, name): one binary search per dtype.
  for (int d = 0; d < kDTypeCount; ++d) {
    const DType dt = static_cast<DType>(d);
    auto it = std::lower_bound(tensors.begin(), tensors.end(), name,
                               [dt](const TensorInfo& t, std::string_view n) {
                                 return write_order_less(t.dtype, t.name, dt, n);
                               });
    if (it != tensors.end() && it->dtype == dt && it->name == name) return &*it;
  }
  return nullptr;
}

Result<ShardLayout> layout_shard(std::vector<OutTensor> tensors,
                                 const std::vector<std::pair<std::string, std::string>>& metadata) {
  std::sort(tensors.begin(), tensors.end(), [](const OutTensor& a, const OutTensor& b) {
    return write_order_less(a.dtype, a.name, b.dtype, b.name);
  });
  {
    std::vector<std::string_view> names;
    names.reserve(tensors.size());
    for (const auto& t : tensors) names.emplace_back(t.name);
    std::sort(names.begin(), names.end());
    auto dup = std::adjacent_find(names.begin(), names.end());
    if (dup != names.end())
      return Error{Errc::BAD_INPUT,
                   fmt::format("tensor '{}': name given twice for one safetensors file",
                               detail::printable(*dup)),
                   {},
                   std::string(*dup)};
  }

  ShardLayout out;
  out.tensors.reserve(tensors.size());
  std::string js = "{";
  bool first = true;
  if (!metadata.empty()) {
    js += "\"__metadata__\":{";
    for (std::size_t i = 0; i < metadata.size(); ++i) {
      for (std::size_t j = 0; j < i; ++j)
        if (metadata[j].first == metadata[i].first)
          return make_error(Errc::BAD_INPUT, "__metadata__ key '{}' given twice",
                            detail::printable(metadata[i].first));
      FP4FORGE_ASSIGN_OR_RETURN(std::string k, json_quote(metadata[i].first, "__metadata__ key"));
      FP4FORGE_ASSIGN_OR_RETURN(std::string v, json_quote(metadata[i].second, "__metadata__ value"));
      if (i) js += ',';
      js += k;
      js += ':';
      js += v;
    }
    js += '}';
    first = false;
  }

  std::uint64_t offset = 0;
  for (auto& t : tensors) {
    if (t.name == "__metadata__")
      return make_error(Errc::BAD_INPUT,
                        "tensor name '__metadata__' is reserved by the safetensors format");
    std::uint64_t numel = 1;
    bool overflow = false;
    for (auto d : t.shape) {
      if (d != 0 && numel > std::numeric_limits<std::uint64_t>::max() / d) overflow = true;
      numel *= d;
    }
    const unsigned bits = dtype_bits(t.dtype);
    if (overflow || numel > std::numeric_limits<std::uint64_t>::max() / bits)
      return Error{Errc::BAD_INPUT,
                   fmt::format("tensor '{}': {} shape [{}] byte size overflows 64 bits",
                               detail::printable(t.name), dtype_name(t.dtype), fmt::join(t.shape, ",")),
                   {},
                   t.name};
    if ((numel * bits) % 8 != 0)
      return Error{Errc::BAD_INPUT,
                   fmt::format("tensor '{}': {} shape [{}] is {} bits, not a whole number of bytes",
                               detail::printable(t.name), dtype_name(t.dtype),
                               fmt::join(t.shape, ","), numel * bits),
                   {},
                   t.name};
    const std::uint64_t nbytes = numel * bits / 8;
    if (nbytes > std::numeric_limits<std::uint64_t>::max() - offset)
      return Error{Errc::BAD_INPUT,
                   fmt::format("tensor '{}': data section size overflows 64 bits",
                               detail::printable(t.name)),
                   {},
                   t.name};
    FP4FORGE_ASSIGN_OR_RETURN(std::string qn, json_quote(t.name, "tensor name"));
    if (!first) js += ',';
    first = false;
    js += qn;
    js += fmt::format(R"(:{{"dtype":"{}","shape":[{}],"data_offsets":[{},{}]}})", dtype_name(t.dtype),
                      fmt::join(t.shape, ","), offset, offset + nbytes);
    TensorInfo info;
    info.name = std::move(t.name);
    info.dtype = t.dtype;
    info.shape = std::move(t.shape);
    info.begin = offset;
    info.end = offset + nbytes;
    offset += nbytes;
    out.tensors.push_back(std::move(info));
  }
  js += '}';
  js.append((8 - js.size() % 8) % 8, ' ');
  if (js.size() > kMaxHeaderSize)
    return make_error(Errc::BAD_INPUT,
                      "safetensors header would be {} bytes, over the {}-byte limit readers accept; "
                      "split the tensors over more shards",
                      js.size(), kMaxHeaderSize);
  const std::uint64_t n = js.size();
  out.header_bytes.reserve(8 + js.size());
  for (int i = 0; i < 8; ++i) out.header_bytes += static_cast<char>((n >> (8 * i)) & 0xff);
  out.header_bytes += js;
  if (offset > std::numeric_limits<std::uint64_t>::max() - out.header_bytes.size())
    return make_error(Errc::BAD_INPUT, "safetensors file size overflows 64 bits");
  out.file_size = out.header_bytes.size() + offset;
  return out;
}

Result<ShardWriter> ShardWriter::create(const std::filesystem::path& final_path, ShardLayout layout) {
  ShardWriter w;
  FP4FORGE_ASSIGN_OR_RETURN(w.file_, fs::AtomicFile::create(final_path));
  w.layout_ = std::move(layout);
  w.written_ = std::make_unique<std::atomic<std::uint64_t>>(0);
  FP4FORGE_TRY(w.file_.file().pwrite_all(
      std::as_bytes(std::span<const char>(w.layout_.header_bytes.data(), w.layout_.header_bytes.size())),
      0));
  return w;
}

Status ShardWriter::write_tensor(const TensorInfo& t, std::span<const std::byte> bytes) {
  if (bytes.size() != t.nbytes())
    return Error{Errc::INTERNAL,
                 fmt::format("cannot write '{}': tensor '{}': got {} bytes, expected {} ({} shape [{}])",
                             file_.final_path().string(), detail::printable(t.name), bytes.size(),
                             t.nbytes(), dtype_name(t.dtype), fmt::join(t.shape, ",")),
                 file_.final_path().string(), t.name};
  auto s = write_at(t.begin, bytes);
  if (!s) {
    Error e = std::move(s).error();
    if (e.tensor.empty()) e.tensor = t.name;
    return e;
  }
  return {};
}

Status ShardWriter::write_at(std::uint64_t offset, std::span<const std::byte> bytes) {
  const std::uint64_t data_size = layout_.file_size - layout_.header_bytes.size();
  if (!written_)
    return make_error(Errc::INTERNAL, "cannot write '{}': writer is not open",
                      file_.final_path().string());
  if (offset > data_size || bytes.size() > data_size - offset)
    return Error{Errc::INTERNAL,
                 fmt::format("cannot write '{}': data range [{},{}) is outside the {}-byte data section",
                             file_.final_path().string(), offset, offset + bytes.size(), data_size),
                 file_.final_path().string(),
                 {}};
  const std::uint64_t at = layout_.header_bytes.size() + offset;
  FP4FORGE_TRY(file_.file().pwrite_all(bytes, at));
  // Large writes start their writeback at once (a shard is written in any order, by many threads).
  if (bytes.size() >= kWritebackBytes) file_.file().start_writeback(at, bytes.size());
  written_->fetch_add(bytes.size(), std::memory_order_relaxed);
  return {};
}

Status ShardWriter::leave_data_sparse() {
  const std::uint64_t data_size = layout_.file_size - layout_.header_bytes.size();
  if (!written_ || written_->load() != 0)
    return make_error(Errc::INTERNAL, "cannot leave '{}' sparse: data was already written",
                      file_.final_path().string());
  if (fs::ops().ftruncate(file_.file().fd(), static_cast<off_t>(layout_.file_size)) != 0)
    return Error{Errc::IO,
                 fmt::format("cannot extend '{}' to {} bytes: {}", file_.partial_path().string(), layout_.file_size,
                             std::strerror(errno)),
                 file_.final_path().string(),
                 {}};
  written_->store(data_size);
  return {};
}

Status ShardWriter::commit() {
  const std::uint64_t data_size = layout_.file_size - layout_.header_bytes.size();
  const std::uint64_t got = written_ ? written_->load() : 0;
  if (got != data_size) {
    std::string path = file_.final_path().string();
    file_.abort();
    return Error{Errc::INTERNAL,
                 fmt::format("cannot commit '{}': {} data bytes written, expected {}", path, got,
                             data_size),
                 path,
                 {}};
  }
  return file_.commit();
}

void ShardWriter::abort() noexcept { file_.abort(); }

Status write_safetensors(const std::filesystem::path& path,
                         const std::vector<std::pair<OutTensor, std::vector<std::byte>>>& tensors,
                         const std::vector<std::pair<std::string, std::string>>& metadata) {
  std::vector<OutTensor> outs;
  outs.reserve(tensors.size());
  for (const auto& [t, bytes] : tensors) outs.push_back(t);
  FP4FORGE_ASSIGN_OR_RETURN(ShardLayout layout, layout_shard(std::move(outs), metadata));
  FP4FORGE_ASSIGN_OR_RETURN(ShardWriter w, ShardWriter::create(path, std::move(layout)));
  for (const auto& [t, bytes] : tensors) {
    const TensorInfo* info = w.layout().find(t.name);
    FP4FORGE_CHECK(info != nullptr);
    FP4FORGE_TRY(w.write_tensor(*info, bytes));
  }
  return w.commit();
}

}  // namespace fp4forge::st
