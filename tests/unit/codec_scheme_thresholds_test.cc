// The decision bounds of the MXFP4A16 and W4A16 fast paths (src/codec/scheme_thresholds.cc) against the
// references' own arithmetic, for every BF16 / F16 magnitude: every MXFP4 scale exponent, and W4A16 scales
// from the smallest (eps) to the largest, both signs. The binary search that builds a bound assumes the
// decision is monotone in |w|; this checks it exhaustively where the source has 16 bits.
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "codec/nvfp4_internal.h"
#include "codec/scheme_fast.h"
#include "fp4forge/codec/half.h"
#include "fp4forge/codec/mxfp4.h"

namespace fp4forge::scheme_fast {
namespace {

float value(DType dt, std::uint16_t m) { return dt == DType::BF16 ? half::bf16_to_float(m) : half::f16_to_float(m); }
float round_d(float x, DType dt) { return dt == DType::BF16 ? half::round_to_bf16(x) : half::round_to_f16(x); }
std::uint16_t top(DType dt) { return dt == DType::BF16 ? 0x7F7F : 0x7BFF; }

class CodecSchemeThresholds : public ::testing::TestWithParam<DType> {};

TEST_P(CodecSchemeThresholds, Mxfp4BoundsAreTheReferenceDecisionForEveryMagnitude) {
  const DType dt = GetParam();
  const MxEntry* t = mxfp4_entries(dt);
  const int fields = dt == DType::F16 ? 32 : 256;
  std::uint64_t checked = 0;
  for (int e = 0; e < fields; ++e) {
    const float p2 = dt == DType::F16 ? half::f16_to_float(static_cast<std::uint16_t>(e << 10))
                                      : half::bf16_to_float(static_cast<std::uint16_t>(e << 7));
    std::uint8_t code = 0;
    float s = 1.0f;
    const bool ok = mxfp4::group_scale(p2, dt, &code, &s);
    ASSERT_EQ(t[e].ok, ok) << e;
    if (!ok) continue;
    EXPECT_EQ(t[e].code, code) << e;
    const auto* b = reinterpret_cast<const std::int16_t*>(t[e].bounds);
    for (std::uint32_t m = 0; m <= top(dt); ++m) {
      for (int sign = 0; sign < 2; ++sign) {
        const float w = sign ? -value(dt, static_cast<std::uint16_t>(m)) : value(dt, static_cast<std::uint16_t>(m));
        float q = round_d(w / s, dt);  // mxfp4_ref.cc step 3
        q = std::min(std::max(q, -6.0f), 6.0f);
        const std::uint8_t want = nvfp4::detail::ref_fp4_code(q);
        int idx = 0;
        for (int k = 0; k < 7; ++k) idx += static_cast<int>(m) > b[k * 32];
        const bool neg = sign && static_cast<int>(m) > b[7 * 32];
        ASSERT_EQ(static_cast<int>(want), idx | (neg ? 8 : 0)) << dtype_name(dt) << " field " << e << " m " << m;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 1'000'000u);
}

TEST_P(CodecSchemeThresholds, W4a16BoundsAreTheReferenceDecisionForEveryMagnitude) {
  const DType dt = GetParam();
  std::mt19937 rng(17);
  std::vector<std::uint16_t> scales = {dt == DType::BF16 ? std::uint16_t{0x3C00} : std::uint16_t{0x1400},  // eps
                                       0x0001, 0x0080, 0x0400, 0x3F80, 0x3C00, top(dt)};
  while (scales.size() < 160) {
    const auto s = static_cast<std::uint16_t>(std::uniform_int_distribution<int>(1, top(dt))(rng));
    scales.push_back(s);
  }
  std::uint64_t checked = 0;
  for (std::uint16_t sb : scales) {
    const float s = value(dt, sb);
    if (!(s > 0.0f)) continue;
    const std::int16_t* b = w4a16_bounds(dt, sb);
    for (std::uint32_t m = 0; m <= top(dt); ++m) {
      int c = 0;
      for (int k = 0; k < 8; ++k) c += static_cast<int>(m) > b[k];
      for (int sign = 0; sign < 2; ++sign) {
        const float w = sign ? -value(dt, static_cast<std::uint16_t>(m)) : value(dt, static_cast<std::uint16_t>(m));
        float q = round_d(w / s, dt);  // w4a16_ref.cc step 3
        q = std::min(std::max(q, -8.0f), 7.0f);
        const int want = static_cast<int>(std::nearbyint(q)) + 8;
        const int got = sign ? 8 - c : 8 + std::min(c, 7);
        ASSERT_EQ(want, got) << dtype_name(dt) << " scale 0x" << std::hex << sb << " m 0x" << m << std::dec;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 1'000'000u);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CodecSchemeThresholds, ::testing::Values(DType::BF16, DType::F16),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

}  // namespace
}  // namespace fp4forge::scheme_fast
