#include "fp4forge/core/dtype.h"

#include <cstring>

#include <array>

namespace fp4forge {
namespace {
struct Info {
  std::string_view name;
  unsigned bits;
  bool is_float;
};
// Order must match enum class DType (safetensors Dtype declaration order).
constexpr std::array<Info, kDTypeCount> kInfo{{
    {"BOOL", 8, false},    {"F4", 4, true},       {"F6_E2M3", 6, true},    {"F6_E3M2", 6, true},
    {"U8", 8, false},      {"I8", 8, false},      {"F8_E5M2", 8, true},    {"F8_E4M3", 8, true},
    {"F8_E8M0", 8, true},  {"F8_E4M3FNUZ", 8, true}, {"F8_E5M2FNUZ", 8, true}, {"I16", 16, false},
    {"U16", 16, false},    {"F16", 16, true},     {"BF16", 16, true},      {"I32", 32, false},
    {"U32", 32, false},    {"F32", 32, true},     {"C64", 64, false},      {"F64", 64, true},
    {"I64", 64, false},    {"U64", 64, false},
}};
}  // namespace

std::string_view dtype_name(DType t) noexcept { return kInfo[static_cast<std::size_t>(t)].name; }
unsigned dtype_bits(DType t) noexcept { return kInfo[static_cast<std::size_t>(t)].bits; }
bool dtype_is_float(DType t) noexcept { return kInfo[static_cast<std::size_t>(t)].is_float; }

std::optional<DType> parse_dtype(std::string_view s) noexcept {
  for (std::size_t i = 0; i < kInfo.size(); ++i)
    if (kInfo[i].name == s) return static_cast<DType>(i);
  return std::nullopt;
}

/** Count of non-finite elements and the first index (bit tests, no conversion). */
std::pair<std::uint64_t, std::uint64_t> count_nonfinite(std::span<const std::byte> d, DType t) noexcept {
  std::uint64_t n = 0, first = 0;
  auto note = [&](std::uint64_t i) {
    if (n++ == 0) first = i;
  };
  if (t == DType::BF16 || t == DType::F16) {
    const std::uint16_t mask = t == DType::BF16 ? 0x7F80 : 0x7C00;
    const std::uint64_t cnt = d.size() / 2;
    for (std::uint64_t i = 0; i < cnt; ++i) {
      std::uint16_t h;
      std::memcpy(&h, d.data() + 2 * i, 2);
      if ((h & mask) == mask) note(i);
    }
  } else if (t == DType::F32) {
    const std::uint64_t cnt = d.size() / 4;
    for (std::uint64_t i = 0; i < cnt; ++i) {
      std::uint32_t b;
      std::memcpy(&b, d.data() + 4 * i, 4);
      if ((b & 0x7F800000u) == 0x7F800000u) note(i);
    }
  } else if (t == DType::F64) {
    const std::uint64_t cnt = d.size() / 8;
    for (std::uint64_t i = 0; i < cnt; ++i) {
      std::uint64_t b;
      std::memcpy(&b, d.data() + 8 * i, 8);
      if ((b & 0x7FF0000000000000ull) == 0x7FF0000000000000ull) note(i);
    }
  }
  return {n, first};
}

}  // namespace fp4forge
