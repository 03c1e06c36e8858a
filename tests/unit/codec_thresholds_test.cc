// The SIMD kernels never divide: they count how many integer thresholds (ThresholdTable) the source
// magnitude bits exceed. This test checks that table against the reference's per-element arithmetic
// (q = fl32(w / eff), clamp, Appendix A thresholds, sign from q < 0) directly:
// exhaustively for BF16 and F16 (every finite magnitude, both signs, every E4M3 scale code) and, for
// F32, at every threshold and its neighbours plus random magnitudes, over global scales that cover
// gs = 1 (overflow), gs near the largest finite value, gs < 1 (huge weights) and ordinary scales.
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "codec/nvfp4_internal.h"
#include "fp4forge/codec/half.h"
#include "fp4forge/codec/nvfp4.h"

namespace fp4forge::nvfp4::detail {
namespace {

// The reference's FP4 code of one weight, written out as in ref_encode.
std::uint8_t reference_code(float w, float eff) {
  float q = w / eff;
  q = std::min(std::max(q, -6.0f), 6.0f);
  return ref_fp4_code(q);
}

// The code the kernels compute from the table: sum of (mag > G[b]) for b < 7, sign if w < 0 and
// mag > G[7].
template <typename T>
std::uint8_t table_code(const T* entry, std::int64_t mag, bool negative) {
  constexpr std::size_t L = ThresholdTable::kLanes;
  int idx = 0;
  for (std::size_t b = 0; b < 7; ++b) idx += mag > entry[b * L];
  const bool sign = negative && mag > entry[7 * L];
  return static_cast<std::uint8_t>(idx | (sign ? 8 : 0));
}

float value_of(DType dt, std::uint32_t mag) {
  if (dt == DType::BF16) return half::bf16_to_float(static_cast<std::uint16_t>(mag));
  if (dt == DType::F16) return half::f16_to_float(static_cast<std::uint16_t>(mag));
  return std::bit_cast<float>(mag);
}

std::vector<float> scales_for(DType dt) {
  // Global scales as produced from tensor amax values of very different magnitudes.
  std::vector<float> gs;
  const float amaxes[] = {0.10009765625f, 0.02f, 1.0f, 3.0f, 0.75f, 42.0f, 7.5e-5f, 65504.0f, 1e-30f, 1e30f, 3e38f};
  for (float a : amaxes) {
    const float r = dt == DType::BF16 ? half::round_to_bf16(a) : dt == DType::F16 ? half::round_to_f16(a) : a;
    if (!std::isfinite(r) || r == 0.0f) continue;
    gs.push_back(global_scale(r, dt));
  }
  gs.push_back(1.0f);
  return gs;
}

std::vector<std::uint8_t> all_scale_codes() {
  std::vector<std::uint8_t> c;
  for (int i = 1; i <= 0x7E; ++i) c.push_back(static_cast<std::uint8_t>(i));  // 0 is stored as 0x20
  return c;
}

class CodecThresholds16 : public ::testing::TestWithParam<DType> {};

TEST_P(CodecThresholds16, EveryMagnitudeEveryScaleCodeMatchesTheReference) {
  const DType dt = GetParam();
  const std::uint32_t top = dt == DType::BF16 ? 0x7F7F : 0x7BFF;
  const auto codes = all_scale_codes();
  std::uint64_t checked = 0, boundary_hits = 0;
  for (float gs : scales_for(dt)) {
    ThresholdTable& tt = ThresholdTable::thread_table(dt, gs);
    tt.ensure(codes.data(), codes.size());
    for (std::uint8_t c : codes) {
      const float eff = e4m3_to_float(c) / gs;
      const std::int16_t* e = tt.entry16(c);
      for (std::size_t b = 0; b < ThresholdTable::kBounds; ++b) {  // every lane holds the same bound
        for (std::size_t l = 1; l < ThresholdTable::kLanes; ++l)
          ASSERT_EQ(e[b * ThresholdTable::kLanes + l], e[b * ThresholdTable::kLanes]);
        boundary_hits += e[b * ThresholdTable::kLanes] > -1 && e[b * ThresholdTable::kLanes] < static_cast<std::int16_t>(top);
      }
      for (std::uint32_t m = 0; m <= top; ++m) {
        const float v = value_of(dt, m);
        for (int neg = 0; neg < 2; ++neg) {
          const std::uint8_t want = reference_code(neg ? -v : v, eff);
          const std::uint8_t got = table_code(e, m, neg != 0);
          if (want != got) {
            FAIL() << dtype_name(dt) << " gs " << gs << " scale code 0x" << std::hex << unsigned{c}
                   << " magnitude 0x" << m << (neg ? " (negative)" : "") << ": reference code 0x"
                   << unsigned{want} << ", table 0x" << unsigned{got};
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 10'000'000u);
  EXPECT_GT(boundary_hits, 1000u);  // the bounds are not all trivial (none / every magnitude)
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CodecThresholds16, ::testing::Values(DType::BF16, DType::F16),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

TEST(CodecThresholdsF32, BoundsTheirNeighboursAndRandomMagnitudesMatchTheReference) {
  const auto codes = all_scale_codes();
  std::mt19937_64 rng(0xF32F32ull);
  std::uniform_int_distribution<std::uint32_t> any_mag(0, 0x7F7FFFFF);
  std::uint64_t checked = 0;
  for (float gs : scales_for(DType::F32)) {
    ThresholdTable& tt = ThresholdTable::thread_table(DType::F32, gs);
    tt.ensure(codes.data(), codes.size());
    for (std::uint8_t c : codes) {
      const float eff = e4m3_to_float(c) / gs;
      const std::int32_t* e = tt.entry32(c);
      std::vector<std::int64_t> mags;
      for (std::size_t b = 0; b < ThresholdTable::kBounds; ++b)
        for (std::int64_t d = -3; d <= 3; ++d) mags.push_back(std::int64_t{e[b * ThresholdTable::kLanes]} + d);
      for (int i = 0; i < 200; ++i) mags.push_back(any_mag(rng));
      for (std::int64_t m : mags) {
        if (m < 0 || m > 0x7F7FFFFF) continue;
        const float v = value_of(DType::F32, static_cast<std::uint32_t>(m));
        for (int neg = 0; neg < 2; ++neg) {
          const std::uint8_t want = reference_code(neg ? -v : v, eff);
          const std::uint8_t got = table_code(e, m, neg != 0);
          ASSERT_EQ(want, got) << "F32 gs " << gs << " scale code " << unsigned{c} << " magnitude " << m
                               << (neg ? " (negative)" : "");
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 500'000u);
}

TEST(CodecThresholds, TableFollowsTheGlobalScaleAndDtypeOfEachCall) {
  // The per-thread table is rebuilt when (dtype, gs) changes: the same code under two scales differs.
  const std::uint8_t c = 0x7B;
  const std::int64_t a = ThresholdTable::compute_bound(DType::BF16, 26880.0f, c, 3);
  const std::int64_t b = ThresholdTable::compute_bound(DType::BF16, 1.0f, c, 3);
  EXPECT_NE(a, b);
  ThresholdTable& t1 = ThresholdTable::thread_table(DType::BF16, 26880.0f);
  t1.ensure(&c, 1);
  EXPECT_EQ(t1.entry16(c)[3 * ThresholdTable::kLanes], a);
  ThresholdTable& t2 = ThresholdTable::thread_table(DType::BF16, 1.0f);
  EXPECT_FALSE(t2.built(c));
  t2.ensure(&c, 1);
  EXPECT_EQ(t2.entry16(c)[3 * ThresholdTable::kLanes], b);
  ThresholdTable& t3 = ThresholdTable::thread_table(DType::F16, 1.0f);
  EXPECT_FALSE(t3.built(c));
}

}  // namespace
}  // namespace fp4forge::nvfp4::detail
