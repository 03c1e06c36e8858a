#include "fp4forge/codec/fp8_dequant.h"

#include "codec/fp8_dequant_internal.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "fp4forge/codec/half.h"
#include "fp4forge/codec/nvfp4.h"

namespace fp4forge::fp8 {
namespace {

const std::array<float, 256>& e4m3_table() {  // nvfp4::e4m3_to_float of every code (the codec's one E4M3 decoding)
  static const std::array<float, 256> t = [] {
    std::array<float, 256> v{};
    for (int c = 0; c < 256; ++c) v[static_cast<std::size_t>(c)] = nvfp4::e4m3_to_float(static_cast<std::uint8_t>(c));
    return v;
  }();
  return t;
}

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return b == 0 ? 0 : (a + b - 1) / b; }

inline float product(float v, float s, DType sd) noexcept {
  float p = v * s;
  if (sd == DType::F16) p = half::round_to_f16(p);
  return p;
}

}  // namespace

const char* scale_layout_name(ScaleLayout l) noexcept {
  switch (l) {
    case ScaleLayout::TENSOR: return "tensor";
    case ScaleLayout::CHANNEL: return "channel";
    case ScaleLayout::BLOCK: return "block";
  }
  return "tensor";
}

std::uint64_t ScaleGrid::scale_rows() const noexcept {
  switch (layout) {
    case ScaleLayout::TENSOR: return 1;
    case ScaleLayout::CHANNEL: return rows;
    case ScaleLayout::BLOCK: return ceil_div(rows, block_rows);
  }
  return 1;
}

std::uint64_t ScaleGrid::scale_cols() const noexcept {
  return layout == ScaleLayout::BLOCK ? ceil_div(cols, block_cols) : 1;
}

std::uint64_t ScaleGrid::scale_index(std::uint64_t flat) const noexcept {
  const std::uint64_t per = rows * cols;
  if (per == 0) return 0;
  const std::uint64_t m = flat / per, in = flat % per, r = in / cols, c = in % cols;
  switch (layout) {
    case ScaleLayout::TENSOR: return m;
    case ScaleLayout::CHANNEL: return m * rows + r;
    case ScaleLayout::BLOCK: return m * scales_per_matrix() + (r / block_rows) * scale_cols() + c / block_cols;
  }
  return 0;
}

float scale_value(const std::byte* scales, std::uint64_t i, DType dtype) noexcept {
  switch (dtype) {
    case DType::BF16: {
      std::uint16_t b;
      std::memcpy(&b, scales + i * 2, 2);
      return half::bf16_to_float(b);
    }
    case DType::F16: {
      std::uint16_t h;
      std::memcpy(&h, scales + i * 2, 2);
      return half::f16_to_float(h);
    }
    case DType::F8_E8M0:
    case DType::U8: {
      const auto b = static_cast<std::uint8_t>(scales[i]);
      return b == 0xFF ? std::numeric_limits<float>::quiet_NaN() : std::ldexp(1.0f, static_cast<int>(b) - 127);
    }
    default: {
      float f;
      std::memcpy(&f, scales + i * 4, 4);
      return f;
    }
  }
}

std::uint16_t dequant_bf16(std::uint8_t code, float scale, DType scale_dtype) noexcept {
  return half::float_to_bf16(product(e4m3_table()[code], scale, scale_dtype));
}

std::uint16_t dequant_e2m1_bf16(std::uint8_t nibble, float scale) noexcept {
  return half::float_to_bf16(nvfp4::fp4_to_float(nibble & 15u) * scale);
}

namespace {

using detail::RunFn;

std::uint64_t dequant_range_on(RunFn run_fn, const std::byte* payload, const std::byte* scales, const ScaleGrid& g,
                               std::uint64_t begin, std::uint64_t count, std::uint16_t* out) noexcept;

}  // namespace

std::vector<std::string_view> dequant_paths() {
  std::vector<std::string_view> out;
  for (const auto& p : detail::run_paths()) out.push_back(p.name);
  return out;
}

std::uint64_t dequant_range(const std::byte* payload, const std::byte* scales, const ScaleGrid& g,
                            std::uint64_t begin, std::uint64_t count, std::uint16_t* out) noexcept {
  return dequant_range_on(detail::run_paths().back().fn, payload, scales, g, begin, count, out);
}

std::optional<std::uint64_t> dequant_range_with(std::string_view path, const std::byte* payload,
                                                const std::byte* scales, const ScaleGrid& g, std::uint64_t begin,
                                                std::uint64_t count, std::uint16_t* out) noexcept {
  for (const auto& p : detail::run_paths())
    if (p.name == path) return dequant_range_on(p.fn, payload, scales, g, begin, count, out);
  return std::nullopt;
}

namespace {

std::uint64_t dequant_range_on(RunFn run_fn, const std::byte* payload, const std::byte* scales, const ScaleGrid& g,
                               std::uint64_t begin, std::uint64_t count, std::uint16_t* out) noexcept {
  const auto& lut = e4m3_table();
  const auto* codes = reinterpret_cast<const std::uint8_t*>(payload);
  std::uint64_t bad = kAllFinite;
  const std::uint64_t end = begin + count;
  // Runs of elements sharing one scale: up to the end of the row (TENSOR/CHANNEL: one scale per row at
  // least) or of the block's columns.
  std::uint64_t i = begin;
  while (i < end) {
    const std::uint64_t c = g.cols == 0 ? 0 : i % g.cols;
    std::uint64_t run = g.cols - c;
    if (g.layout == ScaleLayout::BLOCK) run = std::min(run, g.block_cols - c % g.block_cols);
    run = std::min(run, end - i);
    const float s = scale_value(scales, g.scale_index(i), g.scale_dtype);
    const DType sd = g.scale_dtype;
    bool finite = true;
    if (g.payload == Payload::E2M1) {
      // A run shares one scale, so it has only 16 distinct values: dequant_e2m1_bf16 of each code, made once
      // per run and looked up per element (two per byte), with the codes whose product is not finite.
      // Under a finite scale the negative codes are the positive ones with the sign bit set (RNE is odd); a
      // NaN or infinite scale takes all 16 products (a NaN keeps its own sign through the product).
      std::array<std::uint16_t, 16> val{};
      unsigned nonfinite = 0;
      const unsigned computed = std::isfinite(s) ? 8u : 16u;
      for (unsigned code = 0; code < computed; ++code) {
        const float p = nvfp4::fp4_to_float(static_cast<std::uint8_t>(code)) * s;
        val[code] = half::float_to_bf16(p);
        if (!std::isfinite(p)) nonfinite |= 1u << code;
      }
      for (unsigned code = computed; code < 16; ++code) {
        val[code] = static_cast<std::uint16_t>(val[code - 8] ^ 0x8000u);
        nonfinite |= ((nonfinite >> (code - 8)) & 1u) << code;
      }
      const std::uint64_t stop = i + run;
      std::uint16_t* o = out + (i - begin);
      std::uint64_t j = i;
      if ((j & 1u) != 0) {  // a run starting on a byte's high nibble
        *o++ = val[codes[j >> 1] >> 4];
        ++j;
      }
      for (; j + 1 < stop; j += 2) {
        const std::uint8_t b = codes[j >> 1];
        o[0] = val[b & 15u];
        o[1] = val[b >> 4];
        o += 2;
      }
      if (j < stop) *o = val[codes[j >> 1] & 15u];
      if (nonfinite != 0 && bad == kAllFinite)
        for (std::uint64_t k = i; k < stop; ++k)
          if ((nonfinite >> ((k & 1u) != 0 ? codes[k >> 1] >> 4 : codes[k >> 1] & 15u) & 1u) != 0) {
            bad = k;
            break;
          }
      i = stop;
      continue;
    }
    if (sd != DType::F16) {
      finite = run_fn(codes + i, run, s, out + (i - begin));
    } else {
      for (std::uint64_t j = 0; j < run; ++j) {
        const float p = product(lut[codes[i + j]], s, sd);
        finite = finite && std::isfinite(p);
        out[i - begin + j] = half::float_to_bf16(p);
      }
    }
    if (!finite && bad == kAllFinite)
      for (std::uint64_t j = 0; j < run; ++j)
        if (!std::isfinite(product(lut[codes[i + j]], s, sd))) {
          bad = i + j;
          break;
        }
    i += run;
  }
  return bad;
}

}  // namespace

std::vector<DequantCheck> dequant_selfcheck() {
  // 256 codes repeated 5 times (1280 elements: every vector width's body and tail), one run per scale.
  std::vector<std::byte> codes(1280);
  for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<std::byte>((i * 37 + i / 256) & 0xFF);
  const float scales[] = {1.0f, 0x1p-130f, 3e36f, 1.0f / 3.0f, 0.0078125f, 1e-3f, 0.0f, -2.5f, 7.0e-4f};
  std::vector<DequantCheck> out;
  for (const auto path : dequant_paths()) {
    DequantCheck c;
    c.path = std::string(path);
    for (DType sd : {DType::F32, DType::BF16, DType::F16})
      for (float s0 : scales) {
        float s = s0;
        std::byte sb[4]{};
        if (sd == DType::F32) {
          std::memcpy(sb, &s, 4);
        } else {
          const std::uint16_t b = sd == DType::BF16 ? half::float_to_bf16(s0) : half::float_to_f16(s0);
          s = sd == DType::BF16 ? half::bf16_to_float(b) : half::f16_to_float(b);
          std::memcpy(sb, &b, 2);
        }
        ScaleGrid g;
        g.layout = ScaleLayout::TENSOR;
        g.rows = 1;
        g.cols = codes.size();
        g.scale_dtype = sd;
        std::vector<std::uint16_t> got(codes.size());
        const auto bad = dequant_range_with(path, codes.data(), sb, g, 0, codes.size(), got.data());
        std::uint64_t want_bad = kAllFinite;
        for (std::size_t i = 0; i < codes.size(); ++i) {
          const auto code = static_cast<std::uint8_t>(codes[i]);
          const std::uint16_t want = dequant_bf16(code, s, sd);
          const bool both_nan = (want & 0x7FFFu) > 0x7F80u && (got[i] & 0x7FFFu) > 0x7F80u;
          ++c.elements;
          if (want != got[i] && !both_nan && c.mismatches++ == 0)
            c.first = fmt::format("code 0x{:02x} x {} scale {}: 0x{:04x}, expected 0x{:04x}", code, dtype_name(sd), s,
                                  got[i], want);
          if (want_bad == kAllFinite && !std::isfinite(product(e4m3_table()[code], s, sd))) want_bad = i;
        }
        if (!bad || *bad != want_bad) {
          if (c.mismatches++ == 0)
            c.first = fmt::format("{} scale {}: first non-finite reported at {}, expected {}", dtype_name(sd), s,
                                  bad ? static_cast<std::int64_t>(*bad) : -1,
                                  want_bad == kAllFinite ? -1 : static_cast<std::int64_t>(want_bad));
        }
      }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace fp4forge::fp8
