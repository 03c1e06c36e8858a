// Scalar reference codec: a line-by-line transcription of nvfp4a16-format.md §2 and Appendix A,
// generalised to F16 and F32 sources as the appendix's closing notes say. It favours being obviously
// the spec over speed (the E4M3 rounding is the appendix's arg-min over all 127 finite codes); the
// SIMD kernels are tested against it.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "codec/nvfp4_internal.h"
#include "fp4forge/codec/half.h"

namespace fp4forge::nvfp4::detail {
namespace {

// finfo(D).tiny: 2^-126 for bf16 and fp32, 2^-14 for fp16.
float tiny_d(DType dt) { return dt == DType::F16 ? 0x1p-14f : 0x1p-126f; }

// e4m3(c) for the 127 finite non-negative codes.
struct E4m3Table {
  double v[0x7F];
  E4m3Table() {
    for (int c = 0; c < 0x7F; ++c) v[c] = e4m3_to_float(static_cast<std::uint8_t>(c));
  }
};

// Appendix A `e4m3_rne`: min over codes 0..0x7E of (|e4m3(c) - x|, c & 1).
std::uint8_t e4m3_rne(float x) {
  static const E4m3Table table;
  int best = 0;
  double best_d = std::fabs(table.v[0] - x);
  for (int c = 1; c < 0x7F; ++c) {
    const double d = std::fabs(table.v[c] - x);
    if (d < best_d || (d == best_d && (c & 1) < (best & 1))) {
      best = c;
      best_d = d;
    }
  }
  return static_cast<std::uint8_t>(best);
}

}  // namespace

// Appendix A `fp4_code` (§2.4 thresholds; q already clamped to [-6, 6]).
std::uint8_t ref_fp4_code(float q) noexcept {
  const float a = std::fabs(q);
  const int i = a <= 0.25f ? 0 : a < 0.75f ? 1 : a <= 1.25f ? 2 : a < 1.75f ? 3
              : a <= 2.5f  ? 4 : a < 3.5f  ? 5 : a <= 5.0f  ? 6 : 7;
  return static_cast<std::uint8_t>(i | (q < 0.0f ? 8 : 0));  // q < 0 tiny -> 0x8; q == -0.0 -> 0x0
}

std::uint32_t ref_amax_bits(const std::byte* data, DType dt, std::uint64_t count) {
  std::uint32_t m = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint32_t b = std::bit_cast<std::uint32_t>(load_elem(data, dt, i)) & 0x7FFFFFFFu;
    if (b > m) m = b;
  }
  return m;
}

// §2.2 / Appendix A `global_scale`.
float ref_global_scale(float amax, DType dt) {
  if (std::isnan(amax)) return 1.0f;                   // NaN propagates to g, then nan_to_num -> 1
  const float m = std::max(amax, tiny_d(dt));          // m = max(amax, finfo(D).tiny)
  const float r = round_d(1.0f / m, dt);               // r = flD(1 / m)
  const float g = round_d(r * kGlobalScaleNumerator, dt);  // g = flD(r * 2688)
  if (std::isinf(g) || std::isnan(g)) return 1.0f;     // nan_to_num(nan=1, posinf=1, neginf=1)
  return g;
}

// §2.3 / Appendix A, the per-group part of `quantize_row`.
std::uint8_t ref_group_scale_code(float a, DType dt, float gs) {
  const float sD = round_d(a / 6.0f, dt);              // sD = flD(a / 6.0)
  float p = gs * sD;                                   // p = fl32(gs * float(sD))
  p = std::min(std::max(p, -448.0f), 448.0f);          // clamp(p, -448, 448)
  std::uint8_t c = e4m3_rne(p);                        // e4m3fn RNE
  if (e4m3_to_float(c) == 0.0f) c = kZeroScaleCode;    // s == 0 -> 0.125 (0x20)
  return c;
}

namespace {

// One group of 16 values (exact in D) under E4M3 scale code c: its scale byte and its 8 packed bytes.
void ref_encode_group(const float* grp, std::uint8_t c, float gs, std::byte* packed, std::byte* scale) {
  *scale = static_cast<std::byte>(c);
  const float s = e4m3_to_float(c);
  const float eff = s / gs;                        // eff = fl32(s / gs)
  std::uint8_t codes[kGroupSize];
  for (std::uint64_t k = 0; k < kGroupSize; ++k) {
    float q = grp[k] / eff;                        // q = fl32(w / eff), IEEE division
    q = std::min(std::max(q, -6.0f), 6.0f);        // clamp(q, -6, 6)
    codes[k] = ref_fp4_code(q);
  }
  for (std::uint64_t j = 0; j < kGroupSize; j += 2)  // low nibble = even column
    packed[j / 2] = static_cast<std::byte>(codes[j] | (codes[j + 1] << 4));
}

}  // namespace

bool ref_encode(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, float gs,
                std::byte* packed, std::byte* scale) {
  for (std::uint64_t r = 0; r < rows; ++r) {
    for (std::uint64_t g0 = 0; g0 < cols; g0 += kGroupSize) {
      const std::uint64_t base = r * cols + g0;
      float grp[kGroupSize];
      float a = 0.0f;                                  // a = max|w| in the group (exact in D)
      for (std::uint64_t k = 0; k < kGroupSize; ++k) {
        grp[k] = load_elem(data, dt, base + k);
        if (!std::isfinite(grp[k])) return false;      // R4: never encoded
        a = std::max(a, std::fabs(grp[k]));
      }
      ref_encode_group(grp, ref_group_scale_code(a, dt, gs), gs, packed + base / 2, scale + base / kGroupSize);
    }
  }
  return true;
}

// ref_encode with each group's max|w| replaced by group_max[g] (calculate_qparams on the searched max).
bool ref_encode_maxima(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, float gs,
                       const float* group_max, std::byte* packed, std::byte* scale) {
  const std::uint64_t groups = rows * (cols / kGroupSize);
  for (std::uint64_t g = 0; g < groups; ++g) {
    float grp[kGroupSize];
    for (std::uint64_t j = 0; j < kGroupSize; ++j) grp[j] = load_elem(data, dt, g * kGroupSize + j);
    ref_encode_group(grp, ref_group_scale_code(group_max[g], dt, gs), gs, packed + g * kGroupSize / 2, scale + g);
  }
  return true;
}

}  // namespace fp4forge::nvfp4::detail

namespace fp4forge::nvfp4 {

float load_source_elem(const std::byte* data, DType dt, std::uint64_t i) noexcept {
  if (dt == DType::F32) {
    float f;
    std::memcpy(&f, data + 4 * i, 4);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, data + 2 * i, 2);
  return dt == DType::BF16 ? half::bf16_to_float(h) : half::f16_to_float(h);
}

}  // namespace fp4forge::nvfp4
