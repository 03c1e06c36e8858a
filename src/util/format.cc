#include "fp4forge/util/format.h"

#include <vector>

#include <fmt/format.h>

namespace fp4forge {

std::string format_bytes(std::uint64_t bytes) {
  constexpr std::uint64_t kKiB = 1024ull, kMiB = kKiB * 1024, kGiB = kMiB * 1024, kTiB = kGiB * 1024;
  const double b = static_cast<double>(bytes);
  if (bytes >= kTiB) return fmt::format("{:.2f} TiB", b / static_cast<double>(kTiB));
  if (bytes >= kGiB) return fmt::format("{:.2f} GiB", b / static_cast<double>(kGiB));
  if (bytes >= kMiB) return fmt::format("{:.2f} MiB", b / static_cast<double>(kMiB));
  if (bytes >= kKiB) return fmt::format("{:.2f} KiB", b / static_cast<double>(kKiB));
  return fmt::format("{} B", bytes);
}

std::string format_count(std::uint64_t n) {
  const std::string d = std::to_string(n);
  std::string out;
  out.reserve(d.size() + d.size() / 3);
  for (std::size_t k = 0; k < d.size(); ++k) {
    if (k > 0 && (d.size() - k) % 3 == 0) out += ',';
    out += d[k];
  }
  return out;
}

std::string format_index(std::span<const std::uint64_t> shape, std::uint64_t flat) {
  if (shape.empty()) return "[]";
  std::vector<std::uint64_t> idx(shape.size());
  for (std::size_t i = shape.size(); i-- > 0;) {
    const std::uint64_t s = shape[i] ? shape[i] : 1;
    idx[i] = flat % s;
    flat /= s;
  }
  return format_shape(idx);
}

std::string format_list(std::span<const std::string> items, std::size_t shown) {
  std::string s;
  for (std::size_t i = 0; i < items.size() && i < shown; ++i) s += (i > 0 ? ", " : "") + items[i];
  if (items.size() > shown) s += fmt::format("{}... ({} more)", s.empty() ? "" : ", ", format_count(items.size() - shown));
  return s;
}

std::string format_shape(std::span<const std::uint64_t> shape, std::string_view sep) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s.append(sep);
    s.append(std::to_string(shape[i]));
  }
  s.push_back(']');
  return s;
}

}  // namespace fp4forge
