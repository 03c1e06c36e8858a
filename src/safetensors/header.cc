#include "fp4forge/safetensors/header.h"
#include "fp4forge/util/format.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <variant>

#include "strict_json.h"

namespace fp4forge::st {

std::uint64_t shape_numel(std::span<const std::uint64_t> shape) noexcept {
  std::uint64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::uint64_t TensorInfo::numel() const noexcept { return shape_numel(shape); }

const TensorInfo* Header::find(std::string_view name) const noexcept {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

namespace {

// std::map objects: ordered_json inserts are linear, quadratic for headers of 10^4+ tensors.
using json = nlohmann::json;

// A safetensors header needs depth 3 (root -> entry -> shape); anything deeper is not a header.
constexpr std::size_t kMaxHeaderDepth = 8;
constexpr std::string_view kHint = "header corrupt or hand-edited?";


std::string known_dtypes() {
  std::string s;
  for (int i = 0; i < kDTypeCount; ++i) {
    if (i) s += ' ';
    s += dtype_name(static_cast<DType>(i));
  }
  return s;
}

class Ctx {
 public:
  // The file name is escaped too: a shard found by listing a directory may have a non-UTF-8 name.
  explicit Ctx(std::string_view source) : src_(detail::printable(source, std::string_view::npos)) {}

  template <typename... Args>
  Error file_err(fmt::format_string<Args...> f, Args&&... args) const {
    return Error{Errc::BAD_INPUT,
                 fmt::format("{}: {}", src_, fmt::format(f, std::forward<Args>(args)...)), src_, {}};
  }
  template <typename... Args>
  Error tensor_err(const std::string& tensor, fmt::format_string<Args...> f, Args&&... args) const {
    return Error{Errc::BAD_INPUT,
                 fmt::format("{}: tensor '{}': {}", src_, detail::printable(tensor),
                             fmt::format(f, std::forward<Args>(args)...)),
                 src_, detail::printable(tensor)};
  }

 private:
  std::string src_;
};

Result<TensorInfo> parse_entry(const Ctx& cx, const std::string& name, const json& v) {
  if (!v.is_object())
    return cx.tensor_err(name, "entry is {} {}, expected an object with dtype, shape, data_offsets",
                         v.type_name(), detail::brief(v));
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& k = it.key();
    if (k != "dtype" && k != "shape" && k != "data_offsets")
      return cx.tensor_err(name, "unexpected key '{}'; an entry has only dtype, shape, data_offsets",
                           detail::printable(k));
  }
  for (const char* k : {"dtype", "shape", "data_offsets"})
    if (!v.contains(k))
      return cx.tensor_err(name, "missing key '{}'; an entry has dtype, shape, data_offsets", k);

  TensorInfo t;
  t.name = name;

  const json& dt = v["dtype"];
  if (!dt.is_string())
    return cx.tensor_err(name, "dtype is {} {}, expected a string such as \"BF16\"", dt.type_name(),
                         detail::brief(dt));
  const auto& dts = dt.get_ref<const std::string&>();
  auto parsed = parse_dtype(dts);
  if (!parsed)
    return cx.tensor_err(name, "unknown dtype '{}'; known dtypes: {}", detail::printable(dts),
                         known_dtypes());
  t.dtype = *parsed;

  const json& sh = v["shape"];
  if (!sh.is_array())
    return cx.tensor_err(name, "shape is {} {}, expected an array of non-negative integers",
                         sh.type_name(), detail::brief(sh));
  t.shape.reserve(sh.size());
  for (std::size_t i = 0; i < sh.size(); ++i) {
    const json& d = sh[i];
    if (!d.is_number_unsigned())
      return cx.tensor_err(name, "shape[{}] is {}, expected a non-negative integer", i,
                           detail::brief(d));
    t.shape.push_back(d.get<std::uint64_t>());
  }

  const json& off = v["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
      !off[1].is_number_unsigned())
    return cx.tensor_err(name, "data_offsets is {}, expected [begin,end] (two non-negative integers)",
                         detail::brief(off));
  t.begin = off[0].get<std::uint64_t>();
  t.end = off[1].get<std::uint64_t>();
  if (t.begin > t.end)
    return cx.tensor_err(name, "data_offsets [{},{}] begin is after end; {}", t.begin, t.end, kHint);

  // Expected byte size, overflow-checked: numel, then numel * bits, then / 8.
  std::uint64_t numel = 1;
  for (auto d : t.shape) {
    if (d != 0 && numel > std::numeric_limits<std::uint64_t>::max() / d) {
      // A zero dimension later would make the product 0; the reference also rejects this order.
      return cx.tensor_err(name, "shape {} element count overflows 64 bits; {}", format_shape(t.shape, ","),
                           kHint);
    }
    numel *= d;
  }
  const unsigned bits = dtype_bits(t.dtype);
  if (numel > std::numeric_limits<std::uint64_t>::max() / bits)
    return cx.tensor_err(name, "{} shape {} byte size overflows 64 bits; {}", dtype_name(t.dtype),
                         format_shape(t.shape, ","), kHint);
  const std::uint64_t nbits = numel * bits;
  if (nbits % 8 != 0)
    return cx.tensor_err(name, "{} shape {} is {} bits, not a whole number of bytes; {}",
                         dtype_name(t.dtype), format_shape(t.shape, ","), nbits, kHint);
  const std::uint64_t want = nbits / 8;
  if (t.end - t.begin != want)
    return cx.tensor_err(name, "data_offsets [{},{}] span {} bytes, expected {} ({} shape {}); {}",
                         t.begin, t.end, t.end - t.begin, want, dtype_name(t.dtype),
                         format_shape(t.shape, ","), kHint);
  return t;
}

}  // namespace

Result<Header> parse_header_prefix(std::span<const std::byte> prefix, std::uint64_t file_size,
                                   std::string_view source) {
  Ctx cx(source);
  if (file_size < 8 || prefix.size() < 8)
    return cx.file_err("file is {} bytes, smaller than the 8-byte header length; not a safetensors file?",
                       std::min<std::uint64_t>(file_size, prefix.size()));
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | std::to_integer<std::uint64_t>(prefix[i]);
  if (n < 2)
    return cx.file_err("header length {} is too small (at least 2 for \"{{}}\"); not a safetensors file?",
                       n);
  if (n > kMaxHeaderSize)
    return cx.file_err("header length {} exceeds the {}-byte limit; not a safetensors file?", n,
                       kMaxHeaderSize);
  if (n > file_size - 8)
    return cx.file_err("header length {} exceeds the {} bytes after the length prefix; file truncated?",
                       n, file_size - 8);
  if (prefix.size() - 8 < n)
    return Error{Errc::INTERNAL,
                 fmt::format("{}: parse_header_prefix got {} bytes, the header needs {}", source,
                             prefix.size(), 8 + n),
                 std::string(source),
                 {}};

  std::string_view text(reinterpret_cast<const char*>(prefix.data()) + 8, static_cast<std::size_t>(n));
  detail::KeyOrder meta_order{"__metadata__", {}};
  auto parsed = detail::parse_strict<json>(text, kMaxHeaderDepth, &meta_order);
  if (auto* issue = std::get_if<detail::JsonIssue>(&parsed)) {
    switch (issue->kind) {
      case detail::JsonIssue::Kind::SYNTAX:
        return cx.file_err("header is not valid JSON: {}; not a safetensors file or {}", issue->detail,
                           kHint);
      case detail::JsonIssue::Kind::DEPTH:
        return cx.file_err("header JSON is nested deeper than {} levels; not a safetensors header",
                           kMaxHeaderDepth);
      case detail::JsonIssue::Kind::DUPLICATE_KEY:
        if (issue->depth == 1)
          return cx.tensor_err(issue->key, "name appears twice in the header; {}", kHint);
        if (issue->parent == "/__metadata__")
          return cx.file_err("__metadata__ key '{}' appears twice; {}", detail::printable(issue->key),
                             kHint);
        if (issue->depth == 2)
          return cx.tensor_err(issue->parent.substr(1), "key '{}' appears twice in the entry; {}",
                               detail::printable(issue->key), kHint);
        return cx.file_err("duplicate key '{}' in {}; {}", detail::printable(issue->key),
                           detail::printable(issue->parent), kHint);
    }
  }
  const json& root = std::get<json>(parsed);
  if (!root.is_object())
    return cx.file_err("header JSON is {} {}, expected an object; not a safetensors file?",
                       root.type_name(), detail::brief(root));

  Header h;
  h.header_len = n;
  h.tensors.reserve(root.size());
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object())
        return cx.file_err("__metadata__ is {} {}, expected an object of strings", v.type_name(),
                           detail::brief(v));
      for (const auto& k : meta_order.keys) {  // file order
        const json& m = v[k];
        if (!m.is_string())
          return cx.file_err("__metadata__ '{}' is {} {}, expected a string", detail::printable(k),
                             m.type_name(), detail::brief(m));
        h.metadata.emplace_back(k, m.get<std::string>());
      }
      continue;
    }
    FP4FORGE_ASSIGN_OR_RETURN(TensorInfo t, parse_entry(cx, name, v));
    h.tensors.push_back(std::move(t));
  }

  // Data order: sort by data_offsets (the reference accepts any JSON order), then require contiguity.
  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.name < b.name;
  });
  std::uint64_t expected = 0;
  const TensorInfo* prev = nullptr;
  for (const auto& t : h.tensors) {
    if (t.begin != expected) {
      std::string where = prev ? fmt::format("end of '{}'", detail::printable(prev->name))
                               : std::string("start of the data section");
      if (t.begin > expected)
        return cx.tensor_err(t.name, "data_offsets begin {}, expected {} ({}): a {}-byte gap; {}",
                             t.begin, expected, where, t.begin - expected, kHint);
      return cx.tensor_err(t.name, "data_offsets begin {}, expected {} ({}): overlaps by {} bytes; {}",
                           t.begin, expected, where, expected - t.begin, kHint);
    }
    expected = t.end;
    prev = &t;
  }
  const std::uint64_t data_size = file_size - 8 - n;
  if (expected > data_size)
    return cx.file_err("data section is {} bytes, but the tensors need {} (last: '{}'); file truncated?",
                       data_size, expected, detail::printable(prev->name));
  if (expected < data_size)
    return cx.file_err("data section is {} bytes, but the tensors end at {}: {} trailing bytes; {}",
                       data_size, expected, data_size - expected, kHint);
  return h;
}

Result<Header> parse_header(std::span<const std::byte> file, std::string_view source) {
  return parse_header_prefix(file, file.size(), source);
}

}  // namespace fp4forge::st
